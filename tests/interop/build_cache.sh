# Sourced by tests/interop/java/build.sh and tests/interop/go_build.sh: sets $cache, the
# machine-wide directory where built artefacts are kept between clones, keyed by their inputs.
# $RMQPY_BUILD_CACHE names it (off: no cache); else /var/cache/rmqpy-interop where writable,
# else ~/.cache/rmqpy-interop.
cache="${RMQPY_BUILD_CACHE:-}"
if [ -z "$cache" ]; then
  if mkdir -p /var/cache/rmqpy-interop 2>/dev/null && [ -w /var/cache/rmqpy-interop ]; then
    cache=/var/cache/rmqpy-interop
  else
    cache="${XDG_CACHE_HOME:-$HOME/.cache}/rmqpy-interop"
  fi
fi
