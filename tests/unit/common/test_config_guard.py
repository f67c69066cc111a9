"""config_guard: which keys a remote config update may change."""
from __future__ import annotations

import pytest

from rmqpy.common.config_guard import BROKER_BLACK_LIST, JAVA_REMARK, protected_kind, refusal


@pytest.mark.parametrize("key, kind", [
    ("storePathRootDir", "path"), ("storePathCommitLog", "path"), ("kvConfigPath", "path"),
    ("rocketmqHome", "path"), ("readOnlyCommitLogStorePaths", "path"), ("configStorePath", "path"),
    ("tls.server.mode", "TLS"), ("tls.test.mode.enable", "TLS"), ("tlsEnable", "TLS"),
    ("aclEnable", "ACL"), ("authenticationEnabled", "ACL"), ("authorizationProvider", "ACL"),
    ("innerClientAuthenticationCredentials", "ACL"),
    ("listenPort", "address"), ("haListenPort", "address"), ("brokerIP1", "address"), ("brokerIP2", "address"),
    ("bindAddress", "address"), ("listenHost", "address"), ("namesrvAddr", "address"),
    ("haMasterAddress", "address"), ("metricsPromExporterPort", "address"),
    # not protected: what operators change at run time
    ("brokerPermission", None), ("msgTraceTopicName", None), ("fileReservedTime", None),
    ("supportActingMaster", None), ("cleanRocksDBDirtyCQIntervalMin", None), ("flushDiskType", None),
])
def test_protected_kind(key: str, kind: str | None) -> None:
    assert protected_kind(key) == kind


def test_java_black_list_is_refused_with_javas_remark_even_when_everything_is_allowed() -> None:
    for key in BROKER_BLACK_LIST + ("remoteConfigUpdateAllowKeys",):
        assert refusal({key: "x"}, BROKER_BLACK_LIST, "*") == JAVA_REMARK


def test_protected_keys_need_the_setting() -> None:
    remark = refusal({"storePathRootDir": "/tmp/elsewhere", "fileReservedTime": "3"}, BROKER_BLACK_LIST, "")
    assert remark is not None and remark.startswith(JAVA_REMARK)
    assert "storePathRootDir" in remark and "remoteConfigUpdateAllowKeys" in remark
    assert refusal({"storePathRootDir": "/x"}, BROKER_BLACK_LIST, "listenPort; storePathRootDir") is None
    assert refusal({"storePathRootDir": "/x", "listenPort": "1"}, BROKER_BLACK_LIST, "storePathRootDir") is not None
    assert refusal({"tls.server.mode": "disabled"}, BROKER_BLACK_LIST, "*") is None
    assert refusal({"fileReservedTime": "3"}, BROKER_BLACK_LIST, "") is None


@pytest.mark.parametrize("props", [
    {"msgTraceTopicName": "X\ntls.server.mode=disabled"}, {"msgTraceTopicName": "X\r"}, {"a\x00": "1"},
    {"msgTraceTopicName": "\x7f"}, {"msgTraceTopicName": "\ud800"},
])
def test_control_characters_are_refused_even_when_everything_is_allowed(props: dict[str, str]) -> None:
    remark = refusal(props, BROKER_BLACK_LIST, "*")
    assert remark is not None and "Control characters" in remark and "\n" not in remark
