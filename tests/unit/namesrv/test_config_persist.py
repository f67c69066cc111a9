"""UPDATE_NAMESRV_CONFIG writes every config to configStorePath, as Java's Configuration.persist does."""
from __future__ import annotations

from twisted.internet import defer

from rmqpy.common.filewrite import LatestTextWriter
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from tests.unit.namesrv.test_namesrv import Harness


def test_an_update_writes_what_get_namesrv_config_answers_to_config_store_path(tmp_path) -> None:
    ns = Harness(tmp_path)
    path = tmp_path / "namesrv.properties"
    assert not path.exists()  # nothing is written before an update (Java neither)
    update = RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n")
    assert ns.call(update).code == ResponseCode.SUCCESS
    got = ns.call(RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG)).body.decode()
    assert "orderMessageEnable=true" in got and path.read_text() == got
    refused = RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/tmp/x\n")
    assert ns.call(refused).code == ResponseCode.NO_PERMISSION
    assert path.read_text() == got  # a refused update writes nothing


def test_writes_run_one_at_a_time_and_the_newest_text_wins(tmp_path) -> None:
    calls: list[tuple[str, defer.Deferred]] = []

    def in_thread(fn, path, text):
        d: defer.Deferred = defer.Deferred()
        calls.append((text, d))
        d.addCallback(lambda _: fn(path, text))
        return d

    errors: list[str] = []
    path = tmp_path / "f.properties"
    writer = LatestTextWriter(lambda: str(path), in_thread, lambda p, f: errors.append(p))
    for n in range(100):
        writer.write(f"n={n}\n")
    idle = writer.when_idle()
    assert [t for t, _ in calls] == ["n=0\n"]  # one write under way; the other 99 wait as one
    calls[0][1].callback(None)
    assert [t for t, _ in calls] == ["n=0\n", "n=99\n"] and not idle.called
    calls[1][1].callback(None)
    assert path.read_text() == "n=99\n" and idle.called and errors == []
