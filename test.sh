#!/usr/bin/env bash
# Set up everything the tests need (pip, apt, Maven, Go) and run every test:
# fast unit tests, then interop tests with official Apache RocketMQ clients, mqadmin and
# the Java broker and name server. Extra arguments go to pytest (e.g. -m "not interop").
set -euo pipefail
cd "$(dirname "$0")"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 -m pip install -q --disable-pip-version-check -e '.[test]'
# static checks first, in seconds: lint and types (pyproject.toml [tool.ruff], [tool.mypy]);
# a finding fails the run
python3 -m ruff check --quiet .
python3 -m mypy
if [ -f spark/requirements.txt ]; then
  python3 -m pip install -q --disable-pip-version-check -r spark/requirements.txt
fi
# clients run in podman containers; where podman cannot run, in plain network namespaces
# (the pytest header and docs/compatibility.md name the isolation that ran)
RMQPY_INTEROP_ISOLATION="$(bash tests/interop/choose_isolation.sh)"
export RMQPY_INTEROP_ISOLATION
bash tests/interop/setup_host.sh
bash tests/interop/java/build.sh
if [ -f tests/interop/go/build.sh ]; then bash tests/interop/go/build.sh; fi
# a full run rewrites the published compatibility table (scenario x client)
export RMQPY_COMPAT_REPORT="${RMQPY_COMPAT_REPORT:-$PWD/docs/compatibility.md}"
exec python3 -m pytest -p no:cacheprovider -q -rfEs "$@"
