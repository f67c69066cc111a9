"""run.sh's command line (tests/interop/test_run_sh.py runs it, with the venv it makes)."""
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN_SH = ROOT / "run.sh"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # RMQPY_VENV at a directory that cannot be made: a run that got past the arguments would fail there
    # rather than make a venv or start servers
    return subprocess.run([str(RUN_SH), *args], capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin", "RMQPY_VENV": "/dev/null/venv", **(env or {})})


def test_help_is_the_header_with_the_options_and_variables():
    out = run("--help")
    assert out.returncode == 0 and out.stdout.startswith("Set up rmqpy and run a name server and a broker"), out
    for word in ("--namesrv-port", "--broker-port", "--namesrv-conf", "--broker-conf", "--brokers N", "RMQPY_NAMESRV_CONF",
                 "RMQPY_BROKER_CONF", "RMQPY_NAMESRV_PORT", "RMQPY_BROKER_PORT", "RMQPY_VENV", ".venv"):
        assert word in out.stdout, word
    assert "set -e" not in out.stdout


@pytest.mark.parametrize("args,message", [
    (["--bogus"], "unknown argument: --bogus"),
    (["--brokers", "65"], "--brokers N: N in 1..64, not 65"),
    (["--namesrv-port", "70000"], "not a port: 70000"),
    (["--broker-port"], "--broker-port needs a value"),
    (["--namesrv-conf", "/nonexistent.conf"], "cannot read /nonexistent.conf"),
    (["--brokers", "2", "--broker-conf", str(ROOT / "conf" / "broker.conf")], "no --broker-conf"),
])
def test_bad_arguments_are_one_line_and_exit_code_2(args, message):
    out = run(*args)
    last = out.stderr.splitlines()[-1]
    assert out.returncode == 2 and last.startswith("run.sh: ") and message in last, out


def test_a_bad_port_in_the_environment_is_refused_too():
    out = run(env={"RMQPY_BROKER_PORT": "x"})
    assert out.returncode == 2 and out.stderr == "run.sh: not a port: x\n", out


def test_no_port_is_written_into_the_script_only_in_its_comments():
    """The wait for the name server used 9876 whatever the config said: the port now comes from the
    option or from the name server's file (mqnamesrv -m)."""
    code = [line for line in RUN_SH.read_text().splitlines() if not line.lstrip().startswith("#")]
    assert [line for line in code if re.search(r"\b(9876|10911)\b", line)] == []
    assert "/dev/tcp/127.0.0.1/$ns_port" in RUN_SH.read_text()
