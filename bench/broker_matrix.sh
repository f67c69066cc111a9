#!/usr/bin/env bash
# The issue 19 matrix of bench/broker_bench.py: every case a separate run (rmqpy and Java
# alternating, --repeat rounds), reports under OUT/<case>/ (default bench/report/issue19).
#   bash bench/broker_matrix.sh [OUT] [extra broker_bench.py options, e.g. --seconds 20 --repeat 5]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/report/issue19}; shift || true
common=(--seconds 8 --warmup 2 --repeat 3 "$@")
run() { local name=$1; shift; echo "== $name: $*"; python3 bench/broker_bench.py "${common[@]}" "$@" --out "$out/$name" 2>&1 | tail -14; }
run sync-async-flush --sizes 128,1024,16384
run sync-sync-flush --sizes 1024 --flush SYNC_FLUSH
run async --sizes 1024 --mode async
run oneway --sizes 1024 --mode oneway
run batch32 --sizes 1024 --batch 32
run two-rmqpy-brokers --sizes 1024 --brokers 2
