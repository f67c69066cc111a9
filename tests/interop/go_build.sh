#!/usr/bin/env bash
# Builds a Go interop harness (the Go module in the calling directory) into bin/harness; sourced by
# tests/interop/go/build.sh and tests/interop/go5/build.sh after they cd to their own directory and set
#   kind  - the harness's name in the machine-wide cache (go, go5)
#   what  - what the harness is, for messages
# Idempotent: does nothing while bin/harness is newer than every source file. Modules come from the
# module cache (downloaded through the Go module proxy the first time). A built binary is also kept in
# a machine-wide cache keyed by a hash of the sources (as tests/interop/java/build.sh:
# $RMQPY_BUILD_CACHE, off for none), so a fresh clone copies it.
out=bin/harness
sources=(*.go go.mod go.sum build.sh ../go_build.sh)
if [ -x "$out" ] && [ -z "$(find "${sources[@]}" -maxdepth 0 -newer "$out")" ]; then
  exit 0
fi
# shellcheck source=build_cache.sh
. ../build_cache.sh  # the working directory is the harness's (its build.sh did cd)
key="harness-$kind-$(sha256sum "${sources[@]}" | sha256sum | cut -c1-24)"
mkdir -p bin
if [ "$cache" != off ] && [ -x "$cache/$kind/$key" ]; then
  cp "$cache/$kind/$key" "$out.tmp"
  mv -f "$out.tmp" "$out"
  echo "$(pwd)/$out from $cache/$kind/$key"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "go not found: cannot build $what" >&2
  exit 1
fi
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly -buildvcs=false"
go build -trimpath -o "$out.tmp" .
if [ "$cache" != off ]; then
  mkdir -p "$cache/$kind" && cp "$out.tmp" "$cache/$kind/.$key.$$" && mv -f "$cache/$kind/.$key.$$" "$cache/$kind/$key"
fi
mv -f "$out.tmp" "$out"
echo "built $(pwd)/$out"
