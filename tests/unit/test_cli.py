"""The console scripts: mqnamesrv/mqbroker are the taps; rmqpy-admin's argument handling."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmqpy.tools import admin

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

