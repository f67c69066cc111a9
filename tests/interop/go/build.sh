#!/usr/bin/env bash
# Build the Go interop harness (the official rocketmq-client-go/v2 inside) into bin/harness
# (tests/interop/go_build.sh: when it rebuilds, and the machine-wide cache).
set -euo pipefail
cd "$(dirname "$0")"
kind=go what="the Go interop harness"
# shellcheck source=../go_build.sh
. ../go_build.sh
