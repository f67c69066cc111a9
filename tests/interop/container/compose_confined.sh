#!/usr/bin/env bash
# The README's "In containers" path, run as written, but confined (root, Linux):
#
#   podman-compose -f container/compose.yaml up -d --build
#   podman-compose -f container/compose.yaml ps          # both healthy
#   curl -s http://127.0.0.1:5557/metrics                # the broker's metrics (and 5558: the name server's)
#   podman-compose -f container/compose.yaml exec broker rmqpy-admin updateTopic -n namesrv:9876 -c DefaultCluster -t TestTopic
#   python3 send_and_receive.py                          # the README's official Python client, 127.0.0.1:8081
#   podman-compose -f container/compose.yaml down -v
#
# Confinement: compose's network (a CNI bridge, its iptables NAT/port mappings, ip_forward) is
# podman's own network layer, which the suite never lets touch this host's firewall. So every
# compose command runs inside one private network namespace (`ip netns add`; `nsenter --net` into it
# with a mount namespace of its own for the whole run), whose iptables tables, bridge and sysctls vanish with it; the CNI config dir
# and CNI's IPAM state are the namespace's too (/etc/netns/NS/cni, a tmpfs on /var/lib/cni in the
# run's mount namespace). Podman itself uses a scratch configuration and storage
# ($RMQPY_COMPOSE_PODMAN_DIR, default /var/tmp/rmqpy-compose/podman: not the suite's storage,
# which other runs use at the same time).
#
# The namespace has no route out, so the image cannot fetch its Python packages from in there:
# it is built first in the host's network (`podman build --network=host`, pip behind a
# TLS-intercepting proxy given the host's CA: the Containerfile's documented way), from the
# suite's debootstrapped base (no registry here), with the build args compose.yaml passes; compose's
# `up --build` in the namespace then rebuilds the same recipe with every layer from the cache.
#
# Needs: podman, the suite's base image (RMQPY_INTEROP_ISOLATION=podman tests/interop/setup_host.sh),
# podman-compose (PODMAN_COMPOSE=..., default: found on PATH, else installed from PyPI into a
# throwaway venv; the test extra has it: podman 4.3 has no `podman compose`), CNI's dnsname plugin
# and dnsmasq (compose's service names: the broker's `-n namesrv:9876`; setup_host.sh installs them),
# $PYTHON (default python3) with rocketmq-python-client 5.1.2 (the test extra), curl.
# Cleans up the namespace, the containers, the volumes and the network also on failure.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
COMPOSE_FILE=$ROOT/container/compose.yaml
NS=rmqpy-compose-$$
PDIR=${RMQPY_COMPOSE_PODMAN_DIR:-/var/tmp/rmqpy-compose/podman}
RUNROOT=/run/rmqpy-compose/$(echo -n "$PDIR" | sha1sum | cut -c1-12)
SUITE_PODMAN_DIR=${RMQPY_INTEROP_PODMAN_DIR:-/var/lib/rmqpy-interop/podman}
BASE=localhost/rmqpy-interop-client:bookworm
HOST_CA=/etc/ssl/certs/ca-certificates.crt
WORK=$(mktemp -d /tmp/rmqpy-compose.XXXXXX)
PYTHON=${PYTHON:-python3}
t0=$(date +%s.%N)
say() { printf '[%6.1f s] %s\n' "$(awk "BEGIN {print $(date +%s.%N) - $t0}")" "$*"; }

mkdir -p "$PDIR" "$RUNROOT"
cat > "$PDIR/containers.conf" <<EOF
# written by tests/interop/container/compose_confined.sh
[containers]
default_ulimits = ["nofile=16384:16384", "nproc=4096:4096"]
init_path = "/usr/libexec/podman/catatonit"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
[network]
network_backend = "cni"
EOF
cat > "$PDIR/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$PDIR/storage"
runroot = "$RUNROOT"
EOF
export CONTAINERS_CONF=$PDIR/containers.conf CONTAINERS_STORAGE_CONF=$PDIR/storage.conf
suite_podman() {
    CONTAINERS_CONF=$SUITE_PODMAN_DIR/containers.conf CONTAINERS_STORAGE_CONF=$SUITE_PODMAN_DIR/storage.conf podman "$@"
}

if [ -n "${PODMAN_COMPOSE:-}" ]; then
    PC=$PODMAN_COMPOSE
elif command -v podman-compose >/dev/null; then
    PC=$(command -v podman-compose)
else
    python3 -m venv "$WORK/venv"
    "$WORK/venv/bin/pip" install -q podman-compose==1.6.0
    PC=$WORK/venv/bin/podman-compose
fi
say "podman-compose: $PC ($("$PC" version 2>/dev/null | head -1))"

cleanup() {
    rc=$?
    set +e
    # compose's own `down -v` ran inside (inside.sh's trap), in the mount namespace that holds the
    # containers' network namespaces; here: the namespace, and whatever a killed run left
    ip netns del "$NS" 2>/dev/null
    rm -rf "/etc/netns/$NS" "$WORK"
    for f in /run/netns/netns-*; do  # podman's per-container netns files, made by this run
        [ -e "$f" ] && ! grep -qxF "$f" "$NETNS_BEFORE" 2>/dev/null && ! findmnt "$f" >/dev/null && rm -f "$f"
    done
    rm -f "$NETNS_BEFORE"
    left=$(podman ps -a --format '{{.Names}}' 2>/dev/null | grep '^rmqpy_' || true)
    [ -z "$left" ] || { echo "left containers: $left"; podman rm -f -t 0 $left >/dev/null 2>&1; rc=1; }
    say "cleaned up (exit $rc)"
    exit $rc
}
NETNS_BEFORE=$(mktemp)
ls -d /run/netns/netns-* > "$NETNS_BEFORE" 2>/dev/null || true
trap cleanup EXIT

# the base image: the suite's debootstrapped bookworm, copied into the scratch storage once
if ! podman image exists "$BASE"; then
    suite_podman image save "$BASE" | podman image load >/dev/null
    say "copied $BASE from the suite's storage"
fi
# the image, built in the host's network with the CA (see the head of this script), in the format
# podman-compose builds (podman's default, OCI: no HEALTHCHECK in it, compose.yaml has its own)
# pip's CA through a mounted /etc/pip.conf rather than the PIP_CERT build arg: mounts are no part
# of a layer's cache key, build args are, and compose passes none but BASE
ca=()
if [ -f "$HOST_CA" ]; then
    printf '[global]\ncert = /run/host-ca.crt\n' > "$WORK/pip.conf"
    ca=(-v "$HOST_CA:/run/host-ca.crt:ro" -v "$WORK/pip.conf:/etc/pip.conf:ro")
fi
podman build -q --network=host --build-arg "BASE=$BASE" "${ca[@]}" \
    -f "$ROOT/container/Containerfile" -t localhost/rmqpy:latest "$ROOT" >/dev/null
say "podman build (host network, for pip) done"

ip netns add "$NS"
mkdir -p "/etc/netns/$NS/cni/net.d"
# the mount point of the run's tmpfs: CNI makes /var/lib/cni only when a container first joins a CNI
# network, which nothing else on a fresh host has done (CI of 9902d9e: "mount: /var/lib/cni: mount
# point does not exist", exit 32; it passed where an earlier podman run -p had made it)
mkdir -p /var/lib/cni
ip netns exec "$NS" ip link set lo up
# not `ip netns exec NS cmd`: it mounts a fresh /sys, without this host's cgroup v1 hierarchies,
# and runc then fails ("no cgroup mount found in mountinfo"); nsenter enters the network namespace
# alone, unshare gives the run a mount namespace of its own (slave: nothing propagates back)
in_ns() { nsenter --net="/run/netns/$NS" unshare --mount --propagation slave "$@"; }

# the README's Python program, from the README itself
python3 - "$ROOT/README.md" "$WORK/send_and_receive.py" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
section = text.split("## From Python: the official RocketMQ 5 client", 1)[1]
open(sys.argv[2], "w").write(re.search(r"```python\n(.*?)```", section, re.S).group(1))
EOF

cat > "$WORK/inside.sh" <<EOF
set -euo pipefail
mount --bind /etc/netns/$NS/cni /etc/cni
mount -t tmpfs tmpfs /var/lib/cni
cd '$ROOT'
export RMQPY_BASE='$BASE'
EOF
cat >> "$WORK/inside.sh" <<'EOF'
PC_="$1"; WORK="$2"; T0="$3"; PYTHON="$4"
say() { printf '[%6.1f s] %s\n' "$(awk "BEGIN {print $(date +%s.%N) - $T0}")" "$*"; }
C="$PC_ -f container/compose.yaml"
down() {
    rc=$?
    set +e
    podman rm -f -t 0 rmqpy_run_broker rmqpy_run_namesrv >/dev/null 2>&1
    podman volume rm rmqpy-store >/dev/null 2>&1
    podman rmi localhost/rmqpy-run:latest >/dev/null 2>&1
    $C down -v -t 10 >"$WORK/down.log" 2>&1 || { cat "$WORK/down.log"; rc=1; }
    # the image's anonymous VOLUMEs (the name server's store) outlive `podman-compose down -v`
    podman volume prune -f >/dev/null
    [ -z "$(podman ps -aq)" ] || { echo "containers left after down"; podman rm -f -t 0 $(podman ps -aq); rc=1; }
    say "compose down -v (exit $rc)"
    exit $rc
}
trap down EXIT
$C up -d --build >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; exit 1; }
say "compose up -d --build done"
healthy() {  # podman runs HEALTHCHECKs with systemd timers, which this host lacks: run them here
    for n in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40; do
        podman healthcheck run "$1" >/dev/null 2>&1 && return 0
        sleep 1
    done
    echo "$1 never healthy"; podman logs "$1" | tail -30; return 1
}
healthy rmqpy_namesrv_1 && healthy rmqpy_broker_1
$C ps
$C ps | grep -c '(healthy)' | grep -qx 2 || { echo "not both healthy"; exit 1; }
say "both healthy"
for n in $(seq 30); do
    out=$($C exec broker rmqpy-admin clusterList -n namesrv:9876 2>/dev/null || true)
    grep -q broker-a <<<"$out" && break
    sleep 1
done
$C exec broker rmqpy-admin clusterList -n namesrv:9876
$C exec broker rmqpy-admin updateTopic -n namesrv:9876 -c DefaultCluster -t TestTopic | tee "$WORK/topic.out"
grep -q success "$WORK/topic.out"
say "topic made"
$PYTHON "$WORK/send_and_receive.py" | tee "$WORK/client.out"
grep -qx "b'hello'" "$WORK/client.out"
say "official Python client: sent and received"
curl -sf http://127.0.0.1:5557/metrics > "$WORK/metrics.out"
grep -q '^rocketmq_messages_in_total{.*topic="TestTopic".*} 1' "$WORK/metrics.out"
curl -sf http://127.0.0.1:5558/metrics > "$WORK/ns-metrics.out"
grep -q 'request_code="register_broker"' "$WORK/ns-metrics.out"
say "metrics: broker (5557) counted the message, name server (5558) the registration"
$C down -v -t 10 >"$WORK/down.log" 2>&1 || { cat "$WORK/down.log"; exit 1; }
say "compose down -v done"

# the README's commands without compose: `podman run -p`, the broker given the name server's
# address and its own as one of this host's (here the namespace's "LAN" address, on a veth pair
# inside it: this kernel has no dummy links)
HOST=10.254.0.1
ip link add rmqpylan type veth peer name rmqpylan1
ip addr add $HOST/24 dev rmqpylan
ip link set rmqpylan up
ip link set rmqpylan1 up
podman tag localhost/rmqpy:latest localhost/rmqpy-run:latest
podman run -d --name rmqpy_run_namesrv -p 9876:9876 -p 5558:5558 localhost/rmqpy-run >/dev/null
podman run -d --name rmqpy_run_broker -p 10911:10911 -p 8081:8081 -p 5557:5557 -v rmqpy-store:/home/rocketmq/store \
    localhost/rmqpy-run mqbroker -c /home/rocketmq/conf/broker.conf -n $HOST:9876 -D brokerIP1=$HOST >/dev/null
for n in $(seq 30); do
    out=$(podman exec rmqpy_run_broker rmqpy-admin clusterList -n $HOST:9876 2>/dev/null || true)
    grep -q "broker-a .*$HOST:10911" <<<"$out" && break
    sleep 1
done
podman exec rmqpy_run_broker rmqpy-admin updateTopic -n $HOST:9876 -c DefaultCluster -t TestTopic > "$WORK/topic2.out"
grep -q "create topic to $HOST:10911 success" "$WORK/topic2.out"
sed "s/127.0.0.1:8081/$HOST:8081/" "$WORK/send_and_receive.py" > "$WORK/send_and_receive_lan.py"
$PYTHON "$WORK/send_and_receive_lan.py" | tee "$WORK/client2.out"
grep -qx "b'hello'" "$WORK/client2.out"
curl -sf http://$HOST:5557/metrics > "$WORK/metrics2.out"
grep -q '^rocketmq_messages_in_total{.*topic="TestTopic".*} 1' "$WORK/metrics2.out"
say "podman run -p: registered at $HOST:10911, official Python client sent and received through $HOST:8081, metrics"
EOF
in_ns bash "$WORK/inside.sh" "$PC" "$WORK" "$t0" "$PYTHON"
say "README path passed"
