"""``./run.sh``, the README's first command, on a copy of the checkout as a newcomer has it.

The first start makes the checkout's own venv (``.venv``) and installs rmqpy into it from the
package index (the python3 on PATH is not touched), and runs a name server and a broker on ports
chosen by the environment and by options over the config files' own; the broker registers with
that name server. Then ``./run.sh`` with no argument, verbatim, in a private network namespace
(``unshare -rn``, so that its default ports 9876, 10911 and 8081 do not meet a test's): the venv is
not installed again, and the default broker-a registers on 127.0.0.1:9876. SIGTERM to run.sh
stops both servers. No Java here: it is in the interop suite for the install from the index.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqpy.tools.admin import Admin, AdminError
from tests.interop import servers

pytestmark = pytest.mark.interop
ROOT = Path(__file__).resolve().parents[2]


def _checkout_copy(dst: Path) -> Path:
    """The tracked files as they are in the working tree (symlinks kept), without .venv or build output."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    dst.mkdir()
    subprocess.run(f"tar -C {ROOT} --null -T - -cf - | tar -C {dst} -xf -", shell=True, input=files, check=True)
    return dst


def _registered(ns_addr: str) -> list[tuple[str, str]]:
    admin = Admin(ns_addr, timeout=2)
    try:
        info = admin.cluster_info()
    except (AdminError, OSError, ConnectionError):
        return []
    finally:
        admin.close()
    return [(name, addr) for name, data in (info.get("brokerAddrTable") or {}).items()
            for addr in (data.get("brokerAddrs") or {}).values()]


def _processes_of(checkout: Path) -> list[int]:
    """Processes whose command line names the checkout (run.sh, its venv's twistd)."""
    out = subprocess.run(["pgrep", "-f", str(checkout)], capture_output=True, text=True).stdout
    return [int(pid) for pid in out.split()]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)   # run.sh's trap stops the broker, then the name server
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def checkout(tmp_path):
    copy = _checkout_copy(tmp_path / "rmqpy")
    yield copy
    for pid in _processes_of(copy):   # whatever a failed run left
        os.kill(pid, signal.SIGKILL)


def test_run_sh_installs_into_its_venv_and_runs_on_the_ports_asked_for(checkout, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    ns_port, broker_port = servers.free_port(), servers.free_port()
    (tmp_path / "ns.conf").write_text("listenPort=9876\n")   # the environment's port wins
    (tmp_path / "broker.conf").write_text(
        "brokerClusterName=DefaultCluster\nbrokerName=broker-run\nlistenPort=10911\ngrpcServerPort=-1\n"
        "namesrvAddr=127.0.0.1:9876\n")   # --broker-port wins; it registers with run.sh's name server
    env = dict(os.environ, HOME=str(home), RMQPY_NAMESRV_PORT=str(ns_port),
               PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")))
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    log = tmp_path / "run.out"
    with open(log, "wb") as out:   # relative paths: the caller's directory, not the checkout's
        proc = subprocess.Popen([str(checkout / "run.sh"), "--namesrv-conf", "ns.conf", "--broker-conf", "broker.conf",
                                 "--broker-port", str(broker_port)], cwd=tmp_path, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 540   # the first start installs rmqpy and its dependencies
        while not _registered(f"127.0.0.1:{ns_port}"):
            assert proc.poll() is None and time.time() < deadline, log.read_text()[-3000:]
            time.sleep(1)
        [(name, addr)] = _registered(f"127.0.0.1:{ns_port}")
        assert name == "broker-run" and addr.endswith(f":{broker_port}"), (name, addr)
        venv = checkout / ".venv"
        assert (venv / ".rmqpy-installed").exists() and (venv / "bin" / "twistd").exists()
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        twistds = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0") for pid in children}
        twistds = {pid: argv for pid, argv in twistds.items() if any(a.endswith("/twistd") for a in argv)}
        assert len(twistds) == 2, twistds   # the name server and the broker, from the venv's Python and twistd
        assert all(argv[0].startswith(str(venv)) and argv[1] == str(venv / "bin" / "twistd") for argv in twistds.values()), \
            twistds
        stamp = (venv / ".rmqpy-installed").stat().st_mtime_ns
    finally:
        _stop(proc)
    assert not [pid for pid in twistds if Path(f"/proc/{pid}").exists()]   # both servers ended with run.sh

    # ./run.sh as the README writes it, with the defaults, in a network namespace of its own
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode:
        pytest.skip("unshare -rn is not available: the default ports are not run here")
    probe = (f"import sys, time; sys.path.insert(0, {str(ROOT)!r}); from tests.interop.test_run_sh import _registered\n"
             "deadline = time.time() + 60\n"
             "while not _registered('127.0.0.1:9876') and time.time() < deadline: time.sleep(0.5)\n"
             "print(_registered('127.0.0.1:9876'))")
    script = ("ip link set lo up 2>/dev/null || true\n"
              f"cd {checkout}\n./run.sh > {tmp_path / 'default.out'} 2>&1 &\n"
              f"rs=$!; {sys.executable} -c \"$PROBE\"; kill -TERM $rs; wait $rs\n")
    env.pop("RMQPY_NAMESRV_PORT")
    run = subprocess.run(["unshare", "-rn", "bash", "-c", script], env=dict(env, PROBE=probe), capture_output=True,
                         text=True, timeout=300)
    time.sleep(1)
    assert _processes_of(checkout) == [], "still running after SIGTERM to run.sh"
    out = (tmp_path / "default.out").read_text()
    assert run.stdout.strip() == "[('broker-a', '127.0.0.1:10911')]", (run.stdout, run.stderr, out[-3000:])
    assert "starting on 9876" in out
    assert (venv / ".rmqpy-installed").stat().st_mtime_ns == stamp   # the venv was not installed again
