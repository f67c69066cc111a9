#!/usr/bin/env bash
# Set up rmqpy and run a name server and a broker with the default configuration in conf/.
# Foreground; Ctrl-C stops both. Data goes where conf/broker.conf says (storePathRootDir; ~/store by default, as Java's ${user.home}/store).
set -euo pipefail
cd "$(dirname "$0")"
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
if [ -f twisted/plugins/rmqpy_broker.py ]; then
  setsid twistd -n --pidfile= rmq-broker -c conf/broker.conf &
  pids+=($!)
fi
wait -n
