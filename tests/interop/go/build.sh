#!/usr/bin/env bash
# Build the Go interop harness (the official rocketmq-client-go/v2 inside) into bin/harness.
# Idempotent: does nothing while bin/harness is newer than every source file. Modules come
# from the module cache (downloaded through the Go module proxy the first time).
set -euo pipefail
cd "$(dirname "$0")"
out=bin/harness
if [ -x "$out" ] && [ -z "$(find . -maxdepth 1 \( -name '*.go' -o -name go.mod -o -name go.sum -o -name build.sh \) -newer "$out")" ]; then
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "go not found: cannot build the Go interop harness" >&2
  exit 1
fi
mkdir -p bin
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly -buildvcs=false"
go build -trimpath -o "$out.tmp" .
mv -f "$out.tmp" "$out"
echo "built $(pwd)/$out"
