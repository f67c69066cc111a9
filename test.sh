#!/usr/bin/env bash
# Set up everything the tests need (pip, apt, Maven, Go) and run every test:
# fast unit tests, then interop tests with official Apache RocketMQ clients, mqadmin and
# the Java broker and name server. Extra arguments go to pytest (e.g. -m "not interop").
# The tests run side by side in RMQPY_TEST_WORKERS pytest-xdist workers, 2 by default (docs/testing.md
# says what each phase costs and why 2); RMQPY_TEST_WORKERS=0 runs them in one process.
# The wall time of each phase is printed at the end, whatever the outcome.
set -euo pipefail
cd "$(dirname "$0")"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

phases=()
phase() { # phase NAME COMMAND...: run COMMAND, record its wall time under NAME
  local name="$1" start=$SECONDS status=0
  shift
  "$@" || status=$?
  phases+=("$(printf '%-22s %6d s' "$name" $((SECONDS - start)))")
  return "$status"
}
# the set-up phases that do not need each other run side by side (a fresh machine spends most of
# them waiting on downloads: apt, Maven, Go modules, PyPI): each writes to a log of its own, shown
# when it ends, and its wall time is recorded as phase() does
bg_names=() bg_pids=() bg_logs=() bg_starts=()
phase_bg() { # phase_bg NAME COMMAND...
  local name="$1" log
  shift
  log="$(mktemp)"
  # its own end, in the test.sh's clock (a subshell keeps SECONDS counting)
  (status=0; "$@" || status=$?; echo "$SECONDS" >"$log.end"; exit "$status") >"$log" 2>&1 &
  bg_names+=("$name") bg_pids+=("$!") bg_logs+=("$log") bg_starts+=("$SECONDS")
}
phase_wait() { # waits for every phase_bg; fails if any failed
  local i status=0 one first="${bg_starts[0]:-$SECONDS}"
  for i in "${!bg_pids[@]}"; do
    one=0
    wait "${bg_pids[$i]}" || one=$?
    phases+=("$(printf '%-22s %6d s (beside others)' "${bg_names[$i]}" \
      $(($(cat "${bg_logs[$i]}.end" 2>/dev/null || echo "$SECONDS") - bg_starts[i])))")
    cat "${bg_logs[$i]}" >&2
    rm -f "${bg_logs[$i]}" "${bg_logs[$i]}.end"
    if [ "$one" -ne 0 ]; then
      echo "test.sh: ${bg_names[$i]} failed ($one)" >&2
      status=$one
    fi
  done
  phases+=("$(printf '%-22s %6d s' "set-up side by side" $((SECONDS - first)))")
  bg_names=() bg_pids=() bg_logs=() bg_starts=()
  return "$status"
}
report() {
  local status=$?
  printf '\nwall time by phase (test.sh):\n' >&2
  local line
  for line in "${phases[@]}"; do printf '  %s\n' "$line" >&2; done
  printf '  %-22s %6d s\n' total "$SECONDS" >&2
  exit "$status"
}
trap report EXIT

phase "pip install" python3 -m pip install -q --disable-pip-version-check -e '.[test]'
# static checks first, in seconds: lint and types (pyproject.toml [tool.ruff], [tool.mypy]);
# a finding fails the run
phase "ruff" python3 -m ruff check --quiet .
phase "mypy" python3 -m mypy
if [ -f spark/requirements.txt ]; then
  phase_bg "pip install spark" python3 -m pip install -q --disable-pip-version-check -r spark/requirements.txt
fi
# clients run in podman containers; where podman cannot run, in plain network namespaces
# (the pytest header and docs/compatibility.md name the isolation that ran)
isolation_file="$(mktemp)"
phase_bg "choose isolation" sh -c 'bash tests/interop/choose_isolation.sh > "$1"' sh "$isolation_file"
# Apache's newest broker + proxy served here (5.4.0), the gRPC differential harness's reference
# (tests/interop/test_grpc_diff.py); no client jars of it
export RMQPY_INTEROP_SERVER_VERSIONS="${RMQPY_INTEROP_SERVER_VERSIONS-5.4.0}"
phase_bg "java/build.sh" bash tests/interop/java/build.sh
if [ -f tests/interop/go/build.sh ]; then phase_bg "go/build.sh" bash tests/interop/go/build.sh; fi
if [ -f tests/interop/go5/build.sh ]; then phase_bg "go5/build.sh" bash tests/interop/go5/build.sh; fi
phase_wait
RMQPY_INTEROP_ISOLATION="$(cat "$isolation_file")"
rm -f "$isolation_file"
export RMQPY_INTEROP_ISOLATION
phase "setup_host.sh" bash tests/interop/setup_host.sh
# a full run rewrites the published compatibility table (scenario x client)
export RMQPY_COMPAT_REPORT="${RMQPY_COMPAT_REPORT:-$PWD/docs/compatibility.md}"
# two workers, one per core: 28 min instead of 50 in one process, every test passing; with 3, Java
# clients missed their own 3 s send deadlines under the load (docs/testing.md)
workers="${RMQPY_TEST_WORKERS:-2}"
xdist=()
if [ "$workers" != 0 ]; then
  # loadscope: a module's tests stay on one worker, so its module-scoped servers start once
  # (tests/module_costs.py: the longest modules first)
  xdist=(-n "$workers" --dist loadscope)
fi
phase "pytest" python3 -m pytest -p no:cacheprovider -q -rfEs "${xdist[@]}" "$@"
