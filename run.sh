#!/usr/bin/env bash
# Set up rmqpy and run a name server and a broker with the default configuration in conf/.
# Foreground; Ctrl-C stops both. Data goes where conf/broker.conf says (storePathRootDir; ~/store by default, as Java's ${user.home}/store).
# ./run.sh --brokers N: N brokers of one cluster instead of one, one per core (conf/multi-core/broker.conf;
# broker i: brokerName=broker-i, listenPort=10911+10*i, store ~/store/broker-i, gRPC port 8081+i).
set -euo pipefail
cd "$(dirname "$0")"
brokers=0
if [ "$#" -gt 0 ]; then
  if [ "$1" = "--brokers" ] && [ "$#" -eq 2 ] && [[ "$2" =~ ^[1-9][0-9]?$ ]]; then
    brokers=$2
  else
    echo "usage: ./run.sh [--brokers N]   (N in 1..64)" >&2; exit 2
  fi
fi
python3 -m pip install -q --disable-pip-version-check -e .
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
pids=()
# stop the broker first so that it can unregister from the name server
cleanup() {
  for ((i=${#pids[@]}-1; i>=0; i--)); do kill "${pids[$i]}" 2>/dev/null || true; wait "${pids[$i]}" 2>/dev/null || true; done
}
trap cleanup INT TERM EXIT
setsid twistd -n --pidfile= rmq-namesrv -c conf/namesrv.conf &
pids+=($!)
# the broker retries its name servers every 30 s, but registering at once is nicer
for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/9876) 2>/dev/null && break; sleep 0.1; done
if [ "$brokers" -gt 0 ]; then
  confdir="${RMQPY_RUN_DIR:-$HOME/.rmqpy}/brokers"
  rm -f "$confdir"/broker-*.conf
  confs=$(python3 -m rmqpy.tools.multibroker "$brokers" "$confdir")
  while IFS= read -r conf; do
    setsid twistd -n --pidfile= rmq-broker -c "$conf" &
    pids+=($!)
  done <<< "$confs"
elif [ -f twisted/plugins/rmqpy_broker.py ]; then
  setsid twistd -n --pidfile= rmq-broker -c conf/broker.conf &
  pids+=($!)
fi
wait -n
