#!/bin/sh
# Broker entrypoint for compose.yaml: takes the repository's conf/broker.conf
# (if any), replaces namesrvAddr and brokerIP1 with the compose network's
# addresses, and starts `twistd -n rmq-broker -c conf/broker.conf`.
#   RMQPY_NAMESRV_ADDR  name server host:port          (required)
#   RMQPY_BROKER_IP1    address the broker advertises  (required: the broker
#                       service's own address on the compose network)
set -eu
: "${RMQPY_NAMESRV_ADDR:?}" "${RMQPY_BROKER_IP1:?}"
conf=conf/broker.conf
mkdir -p conf
tmp=$(mktemp)
if [ -f "$conf" ]; then
  grep -v -E '^[[:space:]]*(namesrvAddr|brokerIP1)[[:space:]]*[=:]' "$conf" > "$tmp" || true
else
  printf 'brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\n' > "$tmp"
fi
printf 'namesrvAddr=%s\nbrokerIP1=%s\n' "$RMQPY_NAMESRV_ADDR" "$RMQPY_BROKER_IP1" >> "$tmp"
mv "$tmp" "$conf"
exec twistd -n --pidfile= rmq-broker -c "$conf"
