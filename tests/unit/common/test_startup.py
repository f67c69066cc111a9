"""Both taps' command line: -D for every key, --version, the pidfile, one-line start-up errors."""
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from twisted.scripts._twistd_unix import ServerOptions as TwistdOptions

import rmqpy
from rmqpy import speedups
from rmqpy.broker import tap as broker_tap
from rmqpy.common.startup import ServerRoot, check_ports_free
from rmqpy.namesrv import tap as namesrv_tap

ROOT = Path(__file__).resolve().parents[3]


def test_dash_d_sets_any_key_of_both_taps_and_wins_over_the_file(tmp_path, capsys):
    conf = tmp_path / "b.conf"
    conf.write_text("listenPort=20911\nbrokerName=from-file\n")
    opts = broker_tap.Options()
    opts.parseOptions(["-c", str(conf), "-D", "listenPort=30911", "-D", "fileReservedTime=7",
                       "-D", "autoCreateTopicEnable=false", "-D", "tls.test.mode.enable=false",
                       "-D", "rocketmq.acl.plain.file=conf/acl.yml", "-m"])
    with pytest.raises(SystemExit) as exc:
        broker_tap.makeService(opts)
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "listenPort=30911" in out and "fileReservedTime=7" in out and "brokerName=from-file" in out
    assert "autoCreateTopicEnable=false" in out and "haListenPort=30912" in out
    assert opts["tlsProps"] == {"tls.test.mode.enable": "false", "rocketmq.acl.plain.file": "conf/acl.yml"}

    opts = namesrv_tap.Options()
    opts.parseOptions(["-D", "listenPort=30876", "-D", "orderMessageEnable=true"])
    config, netty = namesrv_tap.build_configs(opts)
    assert netty.listenPort == 30876 and config.orderMessageEnable is True


@pytest.mark.parametrize("tap,args,message", [
    (broker_tap, ["-D", "listenPurt=30911"], "rmq-broker: -D 'listenPurt': unknown config key"),
    (broker_tap, ["-D", "listenPort=x"], "rmq-broker: -D listenPort='x': expected an integer"),
    (namesrv_tap, ["-D", "listenPurt=1", "-D", "nope=2"], "rmq-namesrv: -D 'listenPurt', 'nope': unknown config keys"),
])
def test_an_unknown_or_bad_dash_d_key_is_an_error_naming_it(tap, args, message):
    opts = tap.Options()
    opts.parseOptions(args)
    with pytest.raises(SystemExit) as exc:
        tap.makeService(opts)
    assert exc.value.code == message


def test_dash_d_without_a_value_is_a_usage_error():
    from twisted.python.usage import UsageError
    with pytest.raises(UsageError, match="expected key=value"):
        broker_tap.Options().parseOptions(["-D", "listenPort"])


@pytest.mark.parametrize("tap,name", [(broker_tap, "rmq-broker"), (namesrv_tap, "rmq-namesrv")])
def test_version_names_rmqpy_and_the_rocketmq_version(tap, name, capsys):
    with pytest.raises(SystemExit) as exc:
        tap.Options().parseOptions(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{name} (rmqpy {rmqpy.__version__}): Apache RocketMQ 5.3.3")
    assert out.rstrip().endswith(speedups.describe())  # which path the store's batch loops take


def test_the_pidfile_is_named_after_the_tap_unless_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for tap, name in (("rmq-broker", "rmq-broker.pid"), ("rmq-namesrv", "rmq-namesrv.pid")):
        opts = TwistdOptions()
        opts.parseOptions([tap, "-p"])
        assert opts["pidfile"] == str(tmp_path / name)
    opts = TwistdOptions()
    opts.parseOptions(["--pidfile", "mine.pid", "rmq-broker"])
    assert opts["pidfile"] == str(tmp_path / "mine.pid")
    opts = TwistdOptions()
    opts.parseOptions(["--pidfile=", "rmq-namesrv"])
    assert opts["pidfile"] == ""


def test_the_store_defaults_to_user_home_store(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    from rmqpy.broker.config import load_settings
    assert load_settings().store.storePathRootDir == str(tmp_path / "store")


def _busy_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock


def test_a_busy_port_is_one_line_whether_checked_before_or_met_at_listen():
    from twisted.application import strports
    from twisted.internet.protocol import Factory
    with _busy_port() as sock:
        port = sock.getsockname()[1]
        with pytest.raises(SystemExit) as exc:
            check_ports_free("rmq-broker", "127.0.0.1", [port])
        assert str(exc.value.code).startswith(f"rmq-broker: cannot listen on 127.0.0.1:{port}: address already in use")
        root = ServerRoot("rmq-namesrv")
        strports.service(f"tcp:{port}:interface=127.0.0.1", Factory()).setServiceParent(root)
        with pytest.raises(Exception) as caught:   # an Exception too: a twistd daemon reports it to its parent
            root.privilegedStartService()
        assert isinstance(caught.value, SystemExit)
        assert caught.value.code == f"rmq-namesrv: cannot listen on 127.0.0.1:{port}: " \
            "address already in use (is another name server or broker running?)"


def _twistd(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(tmp_path))
    return subprocess.run([sys.executable, "-c", "from twisted.scripts.twistd import run; run()", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)


def test_real_twistd_busy_port_and_unreadable_file_are_one_line_and_exit_code_1(tmp_path):
    with _busy_port() as sock:
        port = sock.getsockname()[1]
        for tap, extra in (("rmq-namesrv", []), ("rmq-broker", ["-D", "namesrvAddr="])):
            run = _twistd(tmp_path, "-n", tap, "-D", f"listenPort={port}", *extra)
            assert run.returncode == 1 and run.stdout == ""
            assert run.stderr == f"{tap}: cannot listen on 0.0.0.0:{port}: " \
                "address already in use (is another name server or broker running?)\n"
    assert not (tmp_path / "store").exists()   # refused before the store was opened
    unreadable = tmp_path / "missing.conf"
    run = _twistd(tmp_path, "-n", "rmq-broker", "-c", str(unreadable))
    assert (run.returncode, run.stdout) == (1, "")
    assert run.stderr == f"rmq-broker: cannot read config file {unreadable}: No such file or directory\n"
