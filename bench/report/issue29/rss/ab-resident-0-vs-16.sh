cd /work/wt-rss29
for i in 1 2 3; do
  for v in 0 16; do
    echo "== RMQPY_RESIDENT_MB=$v round $i $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
    RMQPY_RESIDENT_MB=$v PYTHONPATH=/work/wt-rss29 python3 bench/broker_bench.py --only rmqpy --seconds 8 --warmup 2 --sizes 1024 --out /tmp/ab-$v-$i 2>&1 | grep -E '^\| 1024 B \| (send TPS|avg send RT|p99|consume TPS|broker CPU ms/msg, (send|consume)|broker RSS after|of which|broker peak)'
  done
done
echo "done $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
