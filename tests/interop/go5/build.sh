#!/usr/bin/env bash
# Build the Go 5.x interop harness (the official gRPC client github.com/apache/rocketmq-clients/golang/v5
# inside) into bin/harness.
# Idempotent: does nothing while bin/harness is newer than every source file. Modules come
# from the module cache (downloaded through the Go module proxy the first time). A built
# binary is also kept in a machine-wide cache keyed by a hash of the sources (as
# tests/interop/java/build.sh: $RMQPY_BUILD_CACHE, off for none), so a fresh clone copies it.
set -euo pipefail
cd "$(dirname "$0")"
out=bin/harness
sources=(*.go go.mod go.sum build.sh)
if [ -x "$out" ] && [ -z "$(find "${sources[@]}" -maxdepth 0 -newer "$out")" ]; then
  exit 0
fi
# shellcheck source=../build_cache.sh
. ../build_cache.sh  # the working directory is this script's (cd above)
key="harness5-$(sha256sum "${sources[@]}" | sha256sum | cut -c1-24)"
mkdir -p bin
if [ "$cache" != off ] && [ -x "$cache/go5/$key" ]; then
  cp "$cache/go5/$key" "$out.tmp"
  mv -f "$out.tmp" "$out"
  echo "$(pwd)/$out from $cache/go5/$key"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "go not found: cannot build the Go 5.x interop harness" >&2
  exit 1
fi
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly -buildvcs=false"
go build -trimpath -o "$out.tmp" .
if [ "$cache" != off ]; then
  mkdir -p "$cache/go5" && cp "$out.tmp" "$cache/go5/.$key.$$" && mv -f "$cache/go5/.$key.$$" "$cache/go5/$key"
fi
mv -f "$out.tmp" "$out"
echo "built $(pwd)/$out"
