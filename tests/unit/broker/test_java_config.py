"""GET_BROKER_CONFIG lists every key the Java broker of the requester's generation lists."""
from __future__ import annotations

import os

import pytest

from rmqpy.broker import java_config
from rmqpy.common.properties import parse_properties
from rmqpy.protocol.codes import MQVersion, RequestCode
from rmqpy.protocol.command import RemotingCommand
from tests.unit.broker.helpers import FakeChannel, call


@pytest.fixture
def broker_overrides():
    return {"brokerName": "broker-py"}


def broker_config(broker, version: int) -> dict[str, str]:
    req = RemotingCommand.request(RequestCode.GET_BROKER_CONFIG)
    req.version = version
    return dict(parse_properties(call(broker, FakeChannel(), req).body.decode()))


def test_every_java_key_per_generation(broker):
    old, new = broker_config(broker, MQVersion.V4_9_8), broker_config(broker, MQVersion.V5_3_3)
    assert set(java_config.JAVA_4_9_7) <= set(old) and set(java_config.JAVA_5_3_3) <= set(new)
    assert len(old) >= 180 and len(new) >= 411  # Java 4.9.7 lists 180 keys, 5.3.3 411
    assert "useServerSideResetOffset" not in old and new["useServerSideResetOffset"] == "true"  # 5.x only
    assert old["commercialEnable"] == "true" and "commercialEnable" not in new  # 4.9 only
    assert old["brokerName"] == new["brokerName"] == "broker-py"  # rmqpy's own setting, not Java's default
    cpus = os.cpu_count() or 1
    assert new["pullMessageThreadPoolNums"] == str(16 + cpus * 2)  # Java's formula on this machine
    assert new["mappedFileSizeTimerLog"] == "104857600"
