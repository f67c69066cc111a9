#!/usr/bin/env bash
# Runs every reference scenario (a test marked `reference`: Apache's servers alone, no rmqpy code) and
# records those that pass in tests/reference_proven.json, with the digest of the inputs they passed on
# (tests/reference.py). CI then skips a recorded reference until one of its inputs changes; commit the
# file after this. Extra arguments go to pytest (e.g. tests/interop/test_pop_java.py for one module).
set -euo pipefail
cd "$(dirname "$0")/.."
export RMQPY_REFERENCES=record
if [ "$#" -eq 0 ]; then set -- tests/interop; fi
exec bash test.sh -m reference "$@"
