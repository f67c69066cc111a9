#!/usr/bin/env bash
# Install what the interop suite's client isolation needs on a Debian host.
#
#   sudo tests/interop/setup_host.sh            # netns isolation (default)
#   sudo tests/interop/setup_host.sh --check    # ... and create/remove a test namespace
#   sudo RMQPY_INTEROP_ISOLATION=podman tests/interop/setup_host.sh
#        # ... plus podman, runc, catatonit, debootstrap, and the local client
#        # image (debootstrapped from Debian's archive, `podman import`ed; no
#        # container registry).  Podman's config stays in
#        # /var/lib/rmqpy-interop/podman (the global /etc/containers is untouched).
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
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "setup_host.sh: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

kind="${RMQPY_INTEROP_ISOLATION:-netns}"
if [ "$kind" = "none" ]; then
  echo "setup_host.sh: RMQPY_INTEROP_ISOLATION=none: clients run on the host, nothing to install"
  exit 0
fi
if [ "$kind" = "external" ]; then
  echo "setup_host.sh: RMQPY_INTEROP_ISOLATION=external: servers are other containers, nothing to install"
  exit 0
fi
if [ "$kind" != "netns" ] && [ "$kind" != "podman" ]; then
  echo "setup_host.sh: RMQPY_INTEROP_ISOLATION=$kind is not supported (netns, podman, none, external)" >&2
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
if [ "$kind" = "podman" ]; then
  # podman's default runtime crun fails here: runc.  catatonit: --init.
  # (podman's own network layer is not used: containers join our namespaces)
  command -v podman >/dev/null 2>&1 || need+=(podman)
  command -v runc >/dev/null 2>&1 || need+=(runc)
  [ -x /usr/libexec/podman/catatonit ] || need+=(catatonit)
  command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
  # compose's network, confined to a namespace of its own (tests/interop/container/compose_confined.sh):
  # CNI's dnsname plugin resolves the services' names (podman 4.3's CNI backend has no DNS without it),
  # with dnsmasq; curl for the README's metrics commands
  [ -x /usr/lib/cni/dnsname ] || need+=(golang-github-containernetworking-plugin-dnsname)
  command -v dnsmasq >/dev/null 2>&1 || need+=(dnsmasq-base)
  command -v curl >/dev/null 2>&1 || need+=(curl)
fi

if [ "${#need[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt_opts=(-o Dpkg::Use-Pty=0 -o APT::Install-Recommends=0 -q -y)
  # retry once: on a fresh machine the first update may race with others
  # one apt at a time: test.sh runs this beside tests/interop/java/build.sh, which may install too
  apt=(flock /var/lock/rmqpy-apt.lock apt-get "${apt_opts[@]}")
  "${apt[@]}" update || { sleep 5; "${apt[@]}" update; }
  "${apt[@]}" install "${need[@]}"
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

if [ "$kind" = "podman" ]; then
  # the client image: built once (about a minute), then reused
  repo="$(cd "$(dirname "$0")/../.." && pwd)"
  (cd "$repo" && "${PYTHON:-python3}" -m tests.interop.isolation image)
fi

echo "setup_host.sh: ready for RMQPY_INTEROP_ISOLATION=$kind ($(ip -V 2>&1 | head -n1))"
