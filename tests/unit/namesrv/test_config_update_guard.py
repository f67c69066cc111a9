"""UPDATE_NAMESRV_CONFIG (issue 11 row 3): Java's black list plus path/TLS/ACL/address keys."""
from __future__ import annotations

import pytest

from rmqpy.common.properties import config_items
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from tests.unit.namesrv.test_namesrv import Harness


@pytest.fixture
def ns(tmp_path) -> Harness:
    return Harness(tmp_path)


def update(ns: Harness, body: bytes) -> RemotingCommand:
    return ns.call(RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body))


def snapshot(ns: Harness) -> list:
    return config_items(ns.ctl.config) + config_items(ns.ctl.netty)


@pytest.mark.parametrize("body", [
    b"kvConfigPath=/tmp/x\n", b"configStorePath=/tmp/x\n", b"rocketmqHome=/tmp\n", b"configBlackList=\n",
    b"listenPort=1\n", b"bindAddress=0.0.0.0\n", b"tls.server.mode=disabled\n", b"remoteConfigUpdateAllowKeys=*\n",
    b"productEnvName=X\\ntls.server.mode=disabled\n",
])
def test_refused_with_no_permission_and_nothing_changes(ns: Harness, body: bytes) -> None:
    before = snapshot(ns)
    resp = update(ns, body + b"orderMessageEnable=true\n")
    assert resp.code == ResponseCode.NO_PERMISSION == 16
    assert resp.remark.startswith("Can not update config in black list.")
    assert snapshot(ns) == before


def test_a_bad_int_is_an_error_reply_not_a_crash(ns: Harness) -> None:
    resp = update(ns, b"orderMessageEnable=true\nscanNotActiveBrokerInterval=abc\n")
    assert resp.code == ResponseCode.SYSTEM_ERROR and "scanNotActiveBrokerInterval" in resp.remark
    assert ns.ctl.config.orderMessageEnable is False


def test_allowed_update_and_opt_in(ns: Harness) -> None:
    assert update(ns, b"orderMessageEnable=true\n").code == ResponseCode.SUCCESS
    assert ns.ctl.config.orderMessageEnable is True
    ns.ctl.config.remoteConfigUpdateAllowKeys = "serverChannelMaxIdleTimeSeconds;listenPort"
    assert update(ns, b"listenPort=9999\n").code == ResponseCode.SUCCESS
    assert ns.ctl.netty.listenPort == 9999


def test_an_oversized_body_is_refused_unread(ns: Harness) -> None:
    resp = update(ns, b"orderMessageEnable=true\n" + b"k=v\n" * 40_000)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "more than 131072" in resp.remark
    assert ns.ctl.config.orderMessageEnable is False


def test_unknown_keys_are_one_log_line(ns: Harness) -> None:
    from twisted.logger import globalLogPublisher
    lines: list = []
    globalLogPublisher.addObserver(lines.append)
    try:
        assert update(ns, b"".join(b"k%d=v\n" % i for i in range(500))).code == ResponseCode.SUCCESS
    finally:
        globalLogPublisher.removeObserver(lines.append)
    warned = [e for e in lines if "unknown config keys" in e.get("log_format", "")]
    assert len(warned) == 1 and warned[0]["n"] == 500
