"""UPDATE_BROKER_CONFIG (issue 11 row 3): what a remote client may change, and nothing else."""
from __future__ import annotations

import pytest

from rmqpy.broker.config import load_settings
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from tests.unit.broker.helpers import FakeChannel, call

CONF = "brokerName=broker-a\nlistenPort=10911\ntls.server.mode=enforcing\n"


@pytest.fixture
def broker(broker, tmp_path):
    (tmp_path / "broker.conf").write_text(CONF)
    broker.settings.config_file = str(tmp_path / "broker.conf")
    return broker


def update(broker, body: bytes) -> RemotingCommand:
    return call(broker, FakeChannel(), RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, body=body))


@pytest.mark.parametrize("body", [
    b"storePathRootDir=/tmp/elsewhere\n", b"storePathCommitLog=/tmp/elsewhere/commitlog\n",
    b"tls.server.mode=disabled\n", b"aclEnable=true\n", b"listenPort=1\n", b"brokerIP1=6.6.6.6\n",
    b"brokerConfigPath=/tmp/x\n", b"remoteConfigUpdateAllowKeys=*\n", b"configBlackList=\n",
    b"msgTraceTopicName=X\\ntls.server.mode=disabled\n",            # the escaped newline of the report
    b"msgTraceTopicName=X\\u000atls.server.mode=disabled\n",
])
def test_refused_with_no_permission_and_nothing_changes(broker, tmp_path, body: bytes) -> None:
    before = (broker.settings.format(), (tmp_path / "broker.conf").read_text())
    resp = update(broker, body + b"fileReservedTime=7\n")
    assert resp.code == ResponseCode.NO_PERMISSION == 16
    assert resp.remark.startswith("Can not update config in black list.")
    assert (broker.settings.format(), (tmp_path / "broker.conf").read_text()) == before


def test_a_value_of_the_wrong_type_is_refused_and_nothing_is_set(broker, tmp_path) -> None:
    resp = update(broker, b"fileReservedTime=7\nbrokerPermission=abc\n")
    assert resp.code == ResponseCode.SYSTEM_ERROR and "brokerPermission" in resp.remark
    assert broker.store_config.fileReservedTime != 7
    assert (tmp_path / "broker.conf").read_text() == CONF


def test_allowed_keys_persist_escaped_and_the_file_gains_no_key(broker, tmp_path) -> None:
    broker.settings.broker.remoteConfigUpdateAllowKeys = "storePathRootDir"
    resp = update(broker, b"msgTraceTopicName=T\\#1 \nstorePathRootDir=/tmp/x y\n")
    assert resp.code == ResponseCode.SUCCESS
    reloaded = load_settings(str(tmp_path / "broker.conf"))
    assert reloaded.broker.msgTraceTopicName == "T#1"
    assert reloaded.store.storePathRootDir == "/tmp/x y"
    text = (tmp_path / "broker.conf").read_text()
    assert "tls.server.mode=enforcing\n" in text and text.count("tls.") == 1


def test_opt_in_star_is_javas_behaviour(broker, tmp_path) -> None:
    broker.settings.broker.remoteConfigUpdateAllowKeys = "*"
    assert update(broker, b"haListenPort=10000\n").code == ResponseCode.SUCCESS
    assert update(broker, b"rocketmqHome=/x\n").code == ResponseCode.NO_PERMISSION      # Java's list stays
    assert update(broker, b"msgTraceTopicName=a\\nb\n").code == ResponseCode.NO_PERMISSION


def test_configured_black_list_adds_keys(broker) -> None:
    broker.settings.broker.configBlackList = "configBlackList;brokerConfigPath;fileReservedTime"
    assert update(broker, b"fileReservedTime=7\n").code == ResponseCode.NO_PERMISSION


@pytest.mark.parametrize("body", [b"flushDiskType=SOMETIMES\n", b"mappedFileSizeConsumeQueue=7\n",
                                  b"brokerRole=KING\n", b"messageDelayLevel=1x\n"])
def test_a_value_that_would_stop_the_next_start_is_refused(broker, tmp_path, body: bytes) -> None:
    before = broker.settings.format()
    resp = update(broker, body)
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark.startswith("string2Properties error")
    assert broker.settings.format() == before
    assert (tmp_path / "broker.conf").read_text() == CONF
    load_settings(str(tmp_path / "broker.conf"))          # the broker still starts


def test_an_oversized_or_malformed_body_is_refused_unread(broker, tmp_path) -> None:
    resp = update(broker, b"fileReservedTime=7\n" + b"k=v\n" * 40_000)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "more than 131072" in resp.remark
    assert update(broker, b"fileReservedTime=7\nmsgTraceTopicName=\\u00G1\n").code == ResponseCode.SYSTEM_ERROR
    assert update(broker, b"fileReservedTime=7\nmsgTraceTopicName=\xff\n").code == ResponseCode.SYSTEM_ERROR
    assert broker.store_config.fileReservedTime != 7


@pytest.mark.parametrize("body", [b"brokerRole=SLAVE\n", b"brokerId=3\n"])
def test_controller_mode_refuses_the_role_and_id_the_controller_owns(broker, tmp_path, body: bytes) -> None:
    """In controller mode an admin's brokerRole/brokerId would fight the controller's election (Java
    sets the field behind its ReplicasManager): refused, the role and the file unchanged."""
    broker.settings.broker.enableControllerMode = True
    role = broker.role
    resp = update(broker, body + b"fileReservedTime=7\n")
    assert resp.code == ResponseCode.NO_PERMISSION and "controller mode" in resp.remark, resp.remark
    assert broker.role == role and broker.store_config.fileReservedTime != 7
    assert (tmp_path / "broker.conf").read_text() == CONF
    broker.settings.broker.enableControllerMode = False  # outside it, the switch is allowed
    assert update(broker, b"fileReservedTime=7\n").code == ResponseCode.SUCCESS
