"""``python -m build`` gives an sdist and a wheel that install into a fresh venv and run.

The wheel (built from the sdist, as ``python -m build`` does) goes into a new venv with its
dependencies from the package index; the venv's ``mqnamesrv`` and ``mqbroker`` run from a
directory outside the checkout, with no PYTHONPATH; the official Java 5.3.3 client sends through
them and consumes what it sent. The wheel carries the Spark data source too: ``rmqpy_spark`` imports
from the venv, with the ``[spark]`` extra's libraries (declared in the wheel's metadata) taken from
this interpreter rather than downloaded again (pyspark alone is ~450 MB).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from tests.interop import clients, servers

pytestmark = pytest.mark.interop
ROOT = Path(__file__).resolve().parents[2]
#: the user's pip cache, as test_run_sh.py's venv gets it: HOME is the run directory below (~/store lands
#: there, as Java's ${user.home}/store), which without this would give pip an empty cache of its own
PIP_CACHE_DIR = os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))


def _run(cmd, **kw) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert proc.returncode == 0, f"{cmd}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _start(argv, log: Path, env, cwd: Path, port: int) -> subprocess.Popen:
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    servers.wait_port("127.0.0.1", port, 60, proc, log)
    deadline = time.time() + 60
    while b"boot success" not in log.read_bytes():
        assert proc.poll() is None and time.time() < deadline, log.read_text()[-3000:]
        time.sleep(0.1)
    return proc


def test_wheel_in_a_fresh_venv_runs_a_name_server_and_broker_for_a_java_client(java_built, client_host, tmp_path):
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)])
    wheels, sdists = list(dist.glob("rmqpy-*.whl")), list(dist.glob("rmqpy-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(dist.iterdir())

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # nothing of the checkout: with it on PYTHONPATH pip would take rmqpy as installed already
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NAMESRV_ADDR", "ROCKETMQ_HOME")}
    env["HOME"] = str(run_dir)
    env["PIP_CACHE_DIR"] = PIP_CACHE_DIR  # pip still resolves from the index; files it has are not fetched again
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], env=env)
    bin_ = venv / "bin"
    _run([str(bin_ / "pip"), "install", "-q", "--disable-pip-version-check", str(wheels[0])], env=env, cwd=run_dir)
    where = _run([str(bin_ / "python"), "-c", "import rmqpy, os; print(rmqpy.__file__); "
                  "c = os.path.join(os.path.dirname(rmqpy.__file__), 'conf'); "
                  "print(sorted(os.path.relpath(os.path.join(d, f), c) for d, _, fs in os.walk(c) for f in fs))"],
                 cwd=run_dir, env=env)
    assert where.startswith(str(venv)), where
    assert where.splitlines()[1] == str(sorted([  # the checkout's conf/ samples, all of them
        "2m-2s-sync/broker-a-s.properties", "2m-2s-sync/broker-a.properties", "2m-2s-sync/broker-b-s.properties",
        "2m-2s-sync/broker-b.properties", "broker.conf", "controller/controller-n0.conf",
        "controller/controller-n1.conf", "controller/controller-n2.conf", "multi-core/broker.conf",
        "namesrv.conf"])), where
    # ./run.sh --brokers N's configurations, from the installed sample, outside any checkout
    made = _run([str(bin_ / "python"), "-m", "rmqpy.tools.multibroker", "2", str(run_dir / "multi")],
                cwd=run_dir, env=env)
    assert made.split() == [str(run_dir / "multi" / "broker-0.conf"), str(run_dir / "multi" / "broker-1.conf")], made
    assert "rmq-broker" in _run([str(bin_ / "twistd"), "--help"], cwd=run_dir, env=env)

    # the extra as pip reads it, then the package from the wheel (pyspark & co. appended after the venv)
    libs = sysconfig.get_paths()["purelib"]
    spark = _run([str(bin_ / "python"), "-c", "import sys, importlib.metadata as m; "
                  "print(sorted(r.split(';')[0] for r in m.requires('rmqpy') if 'extra == \"spark\"' in r)); "
                  f"sys.path.append({libs!r}); import rmqpy_spark; print(rmqpy_spark.__file__); "
                  "print(rmqpy_spark.register.__module__)"], cwd=run_dir, env=env).splitlines()
    assert spark[0] == "['numpy>=1.26', 'pyarrow==26.0.1', 'pyspark==4.3.0']", spark
    assert spark[1].startswith(str(venv)) and spark[2] == "rmqpy_spark.datasource", spark

    ns_port, broker_port = servers.free_port(), servers.free_port()
    host_ip = client_host.host_ip
    procs = []
    try:
        procs.append(_start([str(bin_ / "mqnamesrv"), "-D", f"listenPort={ns_port}"], run_dir / "ns.log", env,
                            run_dir, ns_port))
        ns_addr = f"{host_ip}:{ns_port}"
        procs.append(_start([str(bin_ / "mqbroker"), "-n", ns_addr, "-D", f"listenPort={broker_port}",
                             "-D", f"brokerIP1={host_ip}", "-D", "mappedFileSizeCommitLog=4194304",
                             # gRPC on a free port: 8081 is one per host and other test processes run
                             "-D", f"grpcServerPort={servers.free_port()}"],
                            run_dir / "broker.log", env, run_dir, broker_port))
        assert (run_dir / "store" / "checkpoint").is_file()   # ~/store, as Java's ${user.home}/store
        sent = clients.harness(client_host, "5.3.3", ["produce", "-n", ns_addr, "--topic", "WheelT", "--count", "5"])
        assert len(sent.of("sent")) == 5, sent
        got = clients.harness(client_host, "5.3.3", [
            "consume-push", "-n", ns_addr, "--poll-namesrv-ms", "1000", "--topic", "WheelT", "--group", "wheel_g",
            "--count", "5", "--from", "first", "--timeout-ms", "60000"], timeout=120)
        assert len(got.of("received")) >= 5, got
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def test_editable_install_in_a_fresh_venv_finds_both_taps_and_the_spark_package(tmp_path):
    """``pip install -e .`` (README: "or pip install -e . in a checkout") in a venv of its own, with no
    PYTHONPATH and outside the checkout: Twisted's plugin discovery finds the three taps, and rmqpy and
    rmqpy_spark import from the checkout (setup.py's EditableWheel; it rests on setuptools' private
    _StaticPth, so a setuptools release that moves it fails here)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NAMESRV_ADDR", "ROCKETMQ_HOME")}
    env["HOME"] = str(tmp_path)
    env["PIP_CACHE_DIR"] = PIP_CACHE_DIR
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], env=env)
    _run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", "-e", str(ROOT)], env=env,
         cwd=tmp_path)
    found = _run([str(venv / "bin" / "python"), "-c",
                  "from twisted.plugin import getPlugins; from twisted.application.service import IServiceMaker; "
                  "import rmqpy, rmqpy.broker.tap; "
                  "print(sorted(p.tapname for p in getPlugins(IServiceMaker) if p.tapname.startswith('rmq'))); "
                  "print(rmqpy.__file__); import importlib.util as u; print(u.find_spec('rmqpy_spark').origin)"],
                 env=env, cwd=tmp_path).splitlines()
    assert found[0] == "['rmq-broker', 'rmq-controller', 'rmq-namesrv']", found
    assert found[1] == str(ROOT / "rmqpy" / "__init__.py"), found
    assert found[2] == str(ROOT / "spark" / "rmqpy_spark" / "__init__.py"), found
    assert (venv / "bin" / "mqbroker").exists() and (venv / "bin" / "rmqpy-admin").exists()
    assert (venv / "bin" / "mqcontroller").exists()
