#!/usr/bin/env bash
# Build the Go 5.x interop harness (the official gRPC client github.com/apache/rocketmq-clients/golang/v5
# inside) into bin/harness (tests/interop/go_build.sh: when it rebuilds, and the machine-wide cache).
set -euo pipefail
cd "$(dirname "$0")"
kind=go5 what="the Go 5.x interop harness"
# shellcheck source=../go_build.sh
. ../go_build.sh
