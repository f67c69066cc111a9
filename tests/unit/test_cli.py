"""The console scripts: mqnamesrv/mqbroker are the taps; rmqpy-admin's argument handling."""
import json
import os
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rmqpy.tools import admin
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("script,tap", [("mqnamesrv", "rmq-namesrv"), ("mqbroker", "rmq-broker")])
def test_java_style_scripts_are_the_taps(script, tap, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(tmp_path))
    code = f"import sys; from rmqpy.cli import {script}; {script}(sys.argv[1:])"
    run = subprocess.run([sys.executable, "-c", code, "--version"], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.startswith(f"{tap} (rmqpy "), run
    run = subprocess.run([sys.executable, "-c", code, "-m", "-D", "listenPort=30999"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0 and "listenPort=30999" in run.stdout, run
    assert not list(tmp_path.glob("*.pid"))   # foreground, no pidfile, as Java's scripts


def test_admin_needs_a_name_server_and_says_so(monkeypatch, capsys):
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    assert admin.main(["topicList"]) == 1
    assert capsys.readouterr().err == "rmqpy-admin topicList: no name server address: use -n host:9876 or set NAMESRV_ADDR\n"


def test_admin_connection_refused_is_one_line(capsys):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # bound, not listening: refused
        assert admin.main(["topicList", "-n", f"127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"rmqpy-admin topicList: connect to 127.0.0.1:{port} failed") and err.count("\n") == 1


def test_perm_string_is_javas():
    assert [admin._perm_string(p) for p in (6, 4, 2, 7, 0)] == ["RW-", "R--", "-W-", "RWX", "---"]


def test_every_source_directory_is_a_package_so_the_wheel_ships_it():
    root = ROOT / "rmqpy"
    missing = [str(d.relative_to(ROOT)) for d in root.rglob("*") if d.is_dir() and d.name != "__pycache__"
               and any(d.glob("*.py")) and not (d / "__init__.py").exists()]
    assert missing == []   # find_packages (setup.py) skips a directory without __init__.py


def test_query_msg_by_id_writes_no_body_outside_its_directory(tmp_path, monkeypatch):
    """The body file is named after the message's unique id, which the broker returns: an id that
    is not a plain file name is refused rather than written elsewhere."""
    from rmqpy.protocol.message import MessageExt
    monkeypatch.setattr(admin, "BODY_DIR", str(tmp_path / "a" / "bodies"))
    msg = MessageExt(topic="T", body=b"x", properties={"UNIQ_KEY": "../../escape"})
    with pytest.raises(admin.AdminError, match="not a file name"):
        admin._print_msg(admin.Admin("127.0.0.1:1"), msg, None, print)
    assert not (tmp_path / "escape").exists() and not (tmp_path / "a").exists()


def test_query_msg_by_id_says_resend_and_push_are_not_supported(capsys):
    assert admin.main(["queryMsgById", "-n", "127.0.0.1:1", "-t", "T", "-i", "X", "-s", "true"]) == 1
    assert "not supported by rmqpy-admin; use mqadmin" in capsys.readouterr().err



class FakeServers:
    """A name server and a broker on one loopback port, answering what rmqpy-admin asks with canned
    responses: ``topics`` for the topic list, every route naming this port as the broker, empty consume
    stats and CONSUMER_NOT_ONLINE (206) for connections, as an rmqpy or Java broker answers for a group
    with no consumer online."""

    def __init__(self, topics: list[str]) -> None:
        from rmqpy.protocol import command as codec
        from rmqpy.protocol.codes import RequestCode, ResponseCode
        self.codec, self.responses = codec, ResponseCode
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.listener.getsockname()[1]}"
        route = {"brokerDatas": [{"cluster": "C", "brokerName": "b", "brokerAddrs": {"0": self.addr}}],
                 "queueDatas": []}
        self.answers = {
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: (ResponseCode.SUCCESS, None, {"topicList": topics}),
            RequestCode.GET_ROUTEINFO_BY_TOPIC: (ResponseCode.SUCCESS, None, route),
            RequestCode.GET_CONSUME_STATS: (ResponseCode.SUCCESS, None, {"consumeTps": 0.0, "offsetTable": {}}),
            RequestCode.GET_CONSUMER_CONNECTION_LIST: (ResponseCode.CONSUMER_NOT_ONLINE, "the consumer group not online",
                                                       None),
        }
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as f:
            while (head := f.read(4)) and len(head) == 4:
                request = self.codec.decode(f.read(struct.unpack(">I", head)[0]))
                code, remark, body = self.answers.get(request.code, (self.responses.SYSTEM_ERROR, "unexpected", None))
                response = request.response(code, remark, body=json.dumps(body).encode() if body is not None else None)
                try:
                    conn.sendall(self.codec.encode(response))
                except OSError:
                    return

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def fake_servers():
    servers = FakeServers(["TopicA", "%RETRY%offline_a", "%RETRY%offline_b"] + [f"Many{i:06d}" for i in range(6000)])
    yield servers
    servers.close()


def admin_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "rmqpy.tools.admin", *args]


ADMIN_ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def test_consumer_progress_shows_offline_groups_as_rows_and_writes_nothing_on_stderr(fake_servers):
    """mqadmin consumerProgress logs a group it cannot examine to its tools.log only; rmqpy-admin
    wrote two stderr lines per offline group."""
    run = subprocess.run(admin_cmd("consumerProgress", "-n", fake_servers.addr), env=ADMIN_ENV, capture_output=True,
                         text=True, timeout=30)
    assert run.returncode == 0 and run.stderr == "", run
    rows = [line.split() for line in run.stdout.splitlines()[1:]]
    assert rows == [["offline_a", "0", "OFFLINE", "0", "0"], ["offline_b", "0", "OFFLINE", "0", "0"]], run.stdout


def test_admin_into_head_ends_quietly(fake_servers, tmp_path):
    """``rmqpy-admin topicList | head -1``: head exits after one line of the ~100 KB list (more than a
    pipe holds), and rmqpy-admin ends without ``[Errno 32] Broken pipe`` or an "Exception ignored" at exit."""
    cmd = " ".join(admin_cmd("topicList", "-n", fake_servers.addr))
    run = subprocess.run(["bash", "-c", f"set -o pipefail; {cmd} 2>err.txt | head -1; echo rc=$?"],
                         env=ADMIN_ENV, capture_output=True, text=True, timeout=30, cwd=tmp_path)
    lines = run.stdout.splitlines()
    assert len(lines) == 2 and lines[1] == "rc=1", run   # Python's advice: exit code 1 on EPIPE, quietly
    assert (tmp_path / "err.txt").read_text() == ""


def _run_until_listening(script: str, args: list[str], port: int, tmp_path: Path, probe=None) -> str:
    """Start the console script ``script`` with ``args``, wait until ``port`` accepts, call ``probe``, stop
    it with SIGTERM (as Ctrl-C or systemd) and return what it printed, stdout and stderr together."""
    import signal
    import time
    code = f"import sys; from rmqpy.cli import {script}; {script}(sys.argv[1:])"
    proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(tmp_path)))
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        if probe is not None:
            probe()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out


@pytest.mark.parametrize("script", ["mqnamesrv", "mqbroker"])
def test_help_is_the_scripts_own_usage(script):
    code = f"import sys; from rmqpy.cli import {script}; {script}(sys.argv[1:])"
    for flag in ("--help", "-h"):   # -h as Java's scripts
        run = subprocess.run([sys.executable, "-c", code, flag], env=ADMIN_ENV, capture_output=True, text=True, timeout=30)
        assert run.returncode == 0 and run.stdout.startswith(f"Usage: {script} [-c "), run
        assert "twistd" not in run.stdout and "-D key=value" in run.stdout
    run = subprocess.run([sys.executable, "-c", code, "--bogus"], env=ADMIN_ENV, capture_output=True, text=True, timeout=30)
    assert run.returncode == 1 and run.stdout == "" and "twistd" not in run.stderr, run
    assert run.stderr.endswith(f"{script}: option --bogus not recognized (see {script} --help)\n"), run.stderr


@pytest.mark.parametrize("script", ["mqnamesrv", "mqbroker"])
def test_log_level_warn_prints_no_info_line_at_start_or_stop(script, tmp_path):
    """logLevel=WARN: twistd's own log (stdout under -n) gets no info line, not even the ones logged before
    the reactor runs (TLS set-up, "twistd starting up", "... starting on <port>")."""
    port = free_port((-2, 0, 1))
    args = ["-D", f"listenPort={port}", "-D", "logLevel=WARN", "-D", "bindAddress=127.0.0.1"]
    if script == "mqbroker":
        args += ["-n", "127.0.0.1:1", "-D", "grpcServerPort=-1", "-D", f"storePathRootDir={tmp_path / 'store'}"]
    out = _run_until_listening(script, args, port, tmp_path)
    info = [line for line in out.splitlines() if "#info]" in line or "[-]" in line]
    assert info == [], out
    if script == "mqnamesrv":   # the same without logLevel: the lines are there
        loud = _run_until_listening(script, args[:2] + args[4:], port, tmp_path)
        assert "#info]" in loud and f"starting on {port}" in loud, loud


def test_broker_logs_the_address_its_metrics_endpoint_listens_on(tmp_path):
    """The endpoint binds brokerIP1 as Java's does (not 127.0.0.1 unless brokerIP1 is): the log says where."""
    import urllib.request
    port, mport = free_port((-2, 0, 1)), free_port()
    scraped = []
    url = f"http://127.0.0.2:{mport}/metrics"

    def scrape():
        with urllib.request.urlopen(url, timeout=5) as response:
            scraped.append(response.read().decode())

    out = _run_until_listening("mqbroker", [
        "-n", "127.0.0.1:1", "-D", f"listenPort={port}", "-D", "bindAddress=127.0.0.1", "-D", "grpcServerPort=-1",
        "-D", f"storePathRootDir={tmp_path / 'store'}", "-D", "metricsExporterType=PROM",
        "-D", f"metricsPromExporterPort={mport}", "-D", "brokerIP1=127.0.0.2"], port, tmp_path, scrape)
    assert "rocketmq_" in scraped[0]
    assert f"broker metrics (brokerIP1, as Java; metricsPromExporterHost sets another address): " \
           f"Prometheus endpoint listening on {url}" in out, out
