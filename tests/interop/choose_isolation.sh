#!/usr/bin/env bash
# Prints the isolation the interop tests use on this host (test.sh and tox's interop environment):
# RMQPY_INTEROP_ISOLATION when set, else podman where podman can run here, else netns (plain network
# namespaces). The podman set-up and check write to stderr.
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ -n "${RMQPY_INTEROP_ISOLATION:-}" ]; then
  echo "$RMQPY_INTEROP_ISOLATION"
elif RMQPY_INTEROP_ISOLATION=podman bash tests/interop/setup_host.sh >&2 \
    && RMQPY_INTEROP_ISOLATION=podman python3 -m tests.interop.isolation check >&2; then
  echo podman
else
  echo "choose_isolation.sh: podman cannot run here: falling back to RMQPY_INTEROP_ISOLATION=netns" >&2
  echo netns
fi
