#!/usr/bin/env bash
# Install what the interop suite's client isolation needs on a Debian host.
#
#   sudo tests/interop/setup_host.sh            # netns isolation (default)
#   sudo tests/interop/setup_host.sh --check    # ... and create/remove a test namespace
#
# Idempotent: installs only what is missing (via apt), changes no sysctl, no
# firewall table, and no network setting.  Safe on a fresh Debian machine as
# root; CI calls it before the interop suite.
#
# Needs: iproute2 (`ip netns`, veth, bridge).  The kernel must have network
# namespaces and veth/bridge support (any stock Debian kernel has).
set -euo pipefail

check=0
for arg in "$@"; do
  case "$arg" in
    --check) check=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "setup_host.sh: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

kind="${RMQPY_INTEROP_ISOLATION:-netns}"
if [ "$kind" = "none" ]; then
  echo "setup_host.sh: RMQPY_INTEROP_ISOLATION=none: clients run on the host, nothing to install"
  exit 0
fi
if [ "$kind" != "netns" ]; then
  echo "setup_host.sh: RMQPY_INTEROP_ISOLATION=$kind is not supported (netns or none)" >&2
  exit 2
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup_host.sh: must run as root (it installs packages and the suite creates network namespaces)" >&2
  exit 1
fi

need=()
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# `ip netns exec` runs commands through the caller's PATH; sh is used for a
# per-namespace sysctl.  Both are in every Debian base system.

if [ "${#need[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt_opts=(-o Dpkg::Use-Pty=0 -o APT::Install-Recommends=0 -q -y)
  # retry once: on a fresh machine the first update may race with others
  apt-get "${apt_opts[@]}" update || { sleep 5; apt-get "${apt_opts[@]}" update; }
  apt-get "${apt_opts[@]}" install "${need[@]}"
fi

# The kernel side: can we make a namespace and a veth?  (No addresses, no
# routes: nothing is reachable through these, and both are removed at once.)
if [ "$check" -eq 1 ]; then
  ns="rmqpy-$$-0"   # names the suite's stale cleanup recognises
  veth="rq$$h0"
  cleanup() { ip link del "$veth" 2>/dev/null || true; ip netns del "$ns" 2>/dev/null || true; }
  trap cleanup EXIT
  ip netns add "$ns"
  ip link add "$veth" type veth peer name eth0 netns "$ns"
  ip netns exec "$ns" true
  cleanup
  trap - EXIT
  echo "setup_host.sh: network namespaces and veth pairs work"
fi

echo "setup_host.sh: ready for RMQPY_INTEROP_ISOLATION=netns ($(ip -V 2>&1 | head -n1))"
