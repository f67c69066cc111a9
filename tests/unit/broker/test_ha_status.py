"""GET_BROKER_HA_STATUS (907, ``mqadmin haStatus``): the replication's HARuntimeInfo as the
body, Java's SYSTEM_ERROR without an HA service; what the request needs with authentication on."""
from __future__ import annotations

from rmqpy.auth.contexts import needs
from rmqpy.broker.replicas.ha import MasterOnlyHA
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.ha import HARuntimeInfo
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from tests.unit.broker.helpers import FakeChannel, call, send_request


def test_a_master_answers_its_ha_runtime_info(broker) -> None:
    assert call(broker, FakeChannel(), send_request("T", b"hello")).code == ResponseCode.SUCCESS
    resp = call(broker, FakeChannel(), RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS))
    assert resp.code == ResponseCode.SUCCESS and resp.remark is None
    info = HARuntimeInfo.decode(resp.body)
    end = broker.message_store.get_max_phy_offset()
    assert end > 0
    assert (info.master, info.masterCommitLogMaxOffset, info.inSyncSlaveNums, info.haConnectionInfo) == \
        (True, end, 0, [])
    assert fastjson.loads(resp.body)["haClientRuntimeInfo"] == {
        "lastReadTimestamp": 0, "lastWriteTimestamp": 0, "masterFlushOffset": 0, "maxOffset": 0,
        "transferredByteInSecond": 0}


def test_without_an_ha_service_it_is_javas_system_error(broker) -> None:
    broker.replication = MasterOnlyHA(broker.message_store.get_max_phy_offset)
    resp = call(broker, FakeChannel(), RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS))
    assert (resp.code, resp.remark, resp.body) == \
        (ResponseCode.SYSTEM_ERROR, "Can not get HARuntimeInfo, may be duplicationEnable is true", None)


def test_it_needs_no_permission_as_in_java() -> None:
    """Java's request has no header, so no @RocketMQAction: any authenticated user may ask (as
    GET_BROKER_RUNTIME_INFO)."""
    request = RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS)
    request.ext_fields = {"AccessKey": "u", "Signature": "s"}
    assert needs(request, "DefaultCluster") == []
