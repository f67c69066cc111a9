"""UPDATE_NAMESRV_CONFIG writes every config to configStorePath (the -c file), as Java's Configuration.persist does."""
from __future__ import annotations

from twisted.internet import defer

from rmqpy.common.filewrite import LatestWriter
from rmqpy.common.properties import load_properties
from rmqpy.namesrv.tap import Options, build_configs
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from tests.unit.namesrv.test_namesrv import Harness


def test_an_update_writes_every_config_and_keeps_the_files_other_keys(tmp_path) -> None:
    ns = Harness(tmp_path)
    path = tmp_path / "namesrv.properties"
    path.write_text("listenPort=0\ntls.server.mode=enforcing\n")
    update = RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n")
    assert ns.call(update).code == ResponseCode.SUCCESS
    written = load_properties(str(path))
    got = ns.call(RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG)).body.decode()
    answered = dict(line.split("=", 1) for line in got.splitlines() if "=" in line)
    assert written["orderMessageEnable"] == "true" and set(answered) <= set(written)
    assert written["tls.server.mode"] == "enforcing"  # a key no config object knows stays (Java keeps it too)
    refused = RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/tmp/x\n")
    before = path.read_text()
    assert ns.call(refused).code == ResponseCode.NO_PERMISSION
    assert path.read_text() == before  # a refused update writes nothing


def test_the_config_file_is_the_config_store_path_as_in_namesrv_startup(tmp_path) -> None:
    conf = tmp_path / "ns.conf"
    conf.write_text("listenPort=9999\nconfigStorePath=/elsewhere/namesrv.properties\n")
    options = Options()
    options.parseOptions(["-c", str(conf)])
    config, _ = build_configs(options)
    assert config.configStorePath == str(conf)


def test_writes_run_one_at_a_time_and_the_newest_value_wins(tmp_path) -> None:
    calls: list[tuple[str, defer.Deferred]] = []
    written: list[str] = []

    def in_thread(fn, value):
        d: defer.Deferred = defer.Deferred()
        calls.append((value, d))
        d.addCallback(lambda _: fn(value))
        return d

    errors: list[object] = []
    writer = LatestWriter(written.append, in_thread, errors.append)
    for n in range(100):
        writer.write(f"n={n}")
    idle = writer.when_idle()
    assert [v for v, _ in calls] == ["n=0"]  # one write under way; the other 99 wait as one
    calls[0][1].callback(None)
    assert [v for v, _ in calls] == ["n=0", "n=99"] and not idle.called
    calls[1][1].callback(None)
    assert written == ["n=0", "n=99"] and idle.called and errors == []
