#!/usr/bin/env bash
# Set up rmqpy and run a name server and a broker in the foreground; Ctrl-C stops both.
#
#   ./run.sh                                    conf/namesrv.conf (port 9876) and conf/broker.conf (10911)
#   ./run.sh --namesrv-port 19876 --broker-port 20911          other ports
#   ./run.sh --namesrv-conf ns.conf --broker-conf broker.conf   other configuration files
#   ./run.sh --brokers N       N brokers of one cluster instead of one, one per core (conf/multi-core/broker.conf;
#                              broker i: brokerName=broker-i, listenPort=10911+10*i, store ~/store/broker-i,
#                              gRPC port 8081+i; --broker-port P: P+10*i)
#
# Each option can also be given in the environment (an argument wins): RMQPY_NAMESRV_CONF,
# RMQPY_BROKER_CONF, RMQPY_NAMESRV_PORT, RMQPY_BROKER_PORT. A port option overrides the listenPort of
# its file; without one, the file's listenPort is used (9876 when it has none). The broker registers with
# the name server started here (-n 127.0.0.1:<its port>), whatever namesrvAddr its file names. Data goes
# where the broker's file says (storePathRootDir; ~/store by default, as Java's ${user.home}/store).
#
# rmqpy is installed (pip install -e .) into a venv of its own: .venv in this directory (RMQPY_VENV=DIR
# for another), made by python3 (RMQPY_PYTHON=python3.12 for another; 3.11 or later) and installed again
# when setup.cfg, setup.py or pyproject.toml change. The python3 on PATH is left as it is.
set -euo pipefail

usage() { sed -n '2,/^[^#]/{/^#/{s/^# \{0,1\}//;p}}' "$0"; }
fail() { echo "run.sh: $*" >&2; exit 2; }
absolute() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }

brokers=0
ns_conf=${RMQPY_NAMESRV_CONF:-}
broker_conf=${RMQPY_BROKER_CONF:-}
ns_port=${RMQPY_NAMESRV_PORT:-}
broker_port=${RMQPY_BROKER_PORT:-}
while [ "$#" -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --brokers|--namesrv-conf|--broker-conf|--namesrv-port|--broker-port)
      [ "$#" -ge 2 ] || fail "$1 needs a value (./run.sh --help)"
      case "$1" in
        --brokers) brokers=$2 ;;
        --namesrv-conf) ns_conf=$2 ;;
        --broker-conf) broker_conf=$2 ;;
        --namesrv-port) ns_port=$2 ;;
        --broker-port) broker_port=$2 ;;
      esac
      shift 2 ;;
    *) usage >&2; fail "unknown argument: $1" ;;
  esac
done
[[ "$brokers" =~ ^(0|[1-9][0-9]?)$ ]] && [ "$brokers" -le 64 ] || fail "--brokers N: N in 1..64, not $brokers"
for port in "$ns_port" "$broker_port"; do
  [ -z "$port" ] || { [[ "$port" =~ ^[1-9][0-9]{0,4}$ ]] && [ "$port" -le 65535 ]; } || fail "not a port: $port"
done
[ "$brokers" -eq 0 ] || [ -z "$broker_conf" ] || fail "--brokers N writes its own broker files: no --broker-conf"
# the caller's relative paths, before the cd below
for var in ns_conf broker_conf; do
  if [ -n "${!var}" ]; then
    [ -f "${!var}" ] && [ -r "${!var}" ] || fail "cannot read ${!var}"
    printf -v "$var" '%s' "$(absolute "${!var}")"
  fi
done
venv=${RMQPY_VENV:+$(absolute "$RMQPY_VENV")}
cd "$(dirname "$0")"
ns_conf=${ns_conf:-$PWD/conf/namesrv.conf}
broker_conf=${broker_conf:-$PWD/conf/broker.conf}

# a venv of its own, installed again only when the package's metadata changes
venv=${venv:-$PWD/.venv}
python=${RMQPY_PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  command -v "$python" >/dev/null || { echo "run.sh: no $python on PATH (RMQPY_PYTHON=... chooses one)" >&2; exit 1; }
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || { echo "run.sh: rmqpy needs Python 3.11 or later, $python is $("$python" -V 2>&1) (RMQPY_PYTHON=python3.12 ./run.sh)" >&2; exit 1; }
  echo "run.sh: making a venv in $venv" >&2
  "$python" -m venv "$venv" || {
    echo "run.sh: cannot make a venv in $venv (Debian/Ubuntu: apt-get install python3-venv, then rm -rf $venv)" >&2; exit 1; }
fi
stamp="$venv/.rmqpy-installed"
want="$PWD $(cat setup.cfg setup.py pyproject.toml | cksum)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "run.sh: installing rmqpy and its dependencies into $venv (pip install -e .)" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -e . || {
    echo "run.sh: pip install into $venv failed (no pip in it? Debian/Ubuntu: apt-get install python3-venv, then rm -rf $venv)" >&2
    exit 1; }
  printf '%s\n' "$want" > "$stamp"
fi
bin="$venv/bin"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

# the name server's port: the option, else what its file says (mqnamesrv -m prints the effective value)
if [ -z "$ns_port" ]; then
  ns_port=$("$bin/mqnamesrv" -c "$ns_conf" -m | sed -n 's/^listenPort=//p')
  [ -n "$ns_port" ] || { echo "run.sh: no listenPort in $ns_conf" >&2; exit 1; }
fi

pids=()
# stop the broker first so that it can unregister from the name server
cleanup() {
  for ((i=${#pids[@]}-1; i>=0; i--)); do kill "${pids[$i]}" 2>/dev/null || true; wait "${pids[$i]}" 2>/dev/null || true; done
}
trap cleanup INT TERM EXIT
setsid "$bin/twistd" -n --pidfile= rmq-namesrv -c "$ns_conf" -D "listenPort=$ns_port" &
pids+=($!)
# the broker retries its name servers every 30 s, but registering at once is nicer
for _ in $(seq 50); do (echo > "/dev/tcp/127.0.0.1/$ns_port") 2>/dev/null && break; sleep 0.1; done
ns_args=(-n "127.0.0.1:$ns_port")
if [ "$brokers" -gt 0 ]; then
  confdir="${RMQPY_RUN_DIR:-$HOME/.rmqpy}/brokers"
  rm -f "$confdir"/broker-*.conf
  confs=$("$bin/python" -m rmqpy.tools.multibroker "$brokers" "$confdir" ${broker_port:+--base-port "$broker_port"})
  while IFS= read -r conf; do
    setsid "$bin/twistd" -n --pidfile= rmq-broker -c "$conf" "${ns_args[@]}" &
    pids+=($!)
  done <<< "$confs"
elif [ -f twisted/plugins/rmqpy_broker.py ]; then
  setsid "$bin/twistd" -n --pidfile= rmq-broker -c "$broker_conf" "${ns_args[@]}" ${broker_port:+-D "listenPort=$broker_port"} &
  pids+=($!)
fi
wait -n
