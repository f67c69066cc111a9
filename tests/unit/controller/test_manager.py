"""The controller's liveness, its scans and elections, and the request processor, on a one-node
log and twisted's Clock."""
from __future__ import annotations

from twisted.internet.task import Clock

from rmqpy.controller.config import ControllerConfig
from rmqpy.controller.manager import ControllerManager
from rmqpy.controller.processor import ControllerRequestProcessor
from rmqpy.controller.raft import LocalLog
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.controller import ElectMasterResponseBody, SyncStateSet
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    NotifyBrokerRoleChangedRequestHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
)
from rmqpy.protocol.headers.namesrv import BrokerHeartbeatRequestHeader

C, N = "DefaultCluster", "broker-a"
ADDR = {1: "127.0.0.1:30911", 2: "127.0.0.1:30912"}


class FakeChannel:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def setup(leader: bool = True):
    clock = Clock()
    clock.advance(1_700_000_000)
    log = LocalLog()
    log.leader_ready = leader
    sent: list[tuple[str, RemotingCommand]] = []
    config = ControllerConfig(scanNotActiveBrokerInterval=1000, scanInactiveMasterInterval=1000)
    manager = ControllerManager(config, log, clock, send_oneway=lambda a, r: sent.append((a, r)))
    manager.startService()
    return clock, manager, ControllerRequestProcessor(manager), sent


def call(processor, code, header=None, body=None, channel=None):
    request = RemotingCommand.request(code, header, body)
    result = processor.process_request(channel, request)
    if isinstance(result, RemotingCommand):
        return result
    out = []
    result.addBoth(out.append)
    assert out, "the answer should not wait on a one-node log"
    return out[0]


def heartbeat(processor, broker_id, channel, epoch=1, offset=100, timeout=10_000):
    h = BrokerHeartbeatRequestHeader(C, ADDR[broker_id], N, broker_id, epoch, offset, offset, timeout, None)
    return call(processor, RequestCode.BROKER_HEARTBEAT, h, channel=channel)


def join(processor, broker_id):
    r = call(processor, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(C, N))
    assert r.decode_header(GetNextBrokerIdResponseHeader).nextBrokerId == broker_id
    r = call(processor, RequestCode.CONTROLLER_APPLY_BROKER_ID,
             ApplyBrokerIdRequestHeader(C, N, broker_id, f"{ADDR[broker_id]};1"))
    assert r.code == ResponseCode.SUCCESS, r.remark
    r = call(processor, RequestCode.CONTROLLER_REGISTER_BROKER,
             RegisterBrokerToControllerRequestHeader(C, N, broker_id, ADDR[broker_id]))
    assert r.code == ResponseCode.SUCCESS, r.remark
    return r


def test_a_set_is_formed_as_a_java_broker_does_it():
    clock, manager, p, sent = setup()
    ch1, ch2 = FakeChannel(), FakeChannel()
    heartbeat(p, 1, ch1)
    join(p, 1)
    r = call(p, RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(C, N, 1, False))
    assert r.code == ResponseCode.SUCCESS
    h = r.decode_header(ElectMasterResponseHeader)
    assert (h.masterBrokerId, h.masterAddress, h.masterEpoch, h.syncStateSetEpoch) == (1, ADDR[1], 1, 1)
    assert ElectMasterResponseBody.decode(r.body).syncStateSet == {1}
    assert [a for a, _ in sent] == [ADDR[1]]  # the live broker of the set is told
    heartbeat(p, 2, ch2)
    reg = join(p, 2).decode_header(RegisterBrokerToControllerResponseHeader)
    assert (reg.masterBrokerId, reg.masterAddress, reg.masterEpoch) == (1, ADDR[1], 1)
    r = call(p, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, AlterSyncStateSetRequestHeader(N, 1, 1),
             SyncStateSet(frozenset({1, 2}), 1).encode())
    assert SyncStateSet.decode(r.body) == SyncStateSet(frozenset({1, 2}), 2)
    r = call(p, RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(N))
    assert r.decode_header(GetReplicaInfoResponseHeader).masterBrokerId == 1
    r = call(p, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=fastjson.dumps([N]).encode())
    table = fastjson.loads(r.body)["replicasInfoTable"][N]
    assert [x["brokerId"] for x in table["inSyncReplicas"]] == [1, 2] and table["masterEpoch"] == 1


def test_a_dead_master_is_replaced_and_the_set_told():
    clock, manager, p, sent = setup()
    ch1, ch2 = FakeChannel(), FakeChannel()
    heartbeat(p, 1, ch1)
    heartbeat(p, 2, ch2)
    join(p, 1)
    join(p, 2)
    call(p, RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(C, N, 1, False))
    call(p, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, AlterSyncStateSetRequestHeader(N, 1, 1),
         SyncStateSet(frozenset({1, 2}), 1).encode())
    sent.clear()
    for _ in range(12):  # broker 2 keeps beating, broker 1 went silent
        clock.advance(1)
        heartbeat(p, 2, ch2)
    assert ch1.closed  # the scan dropped it and closed its connection
    info = manager.state.sync_state[N]
    assert (info.masterBrokerId, info.masterEpoch, info.syncStateSet) == (2, 2, {2})
    assert [a for a, _ in sent] == [ADDR[2]]
    notice = sent[0][1]
    assert notice.code == RequestCode.NOTIFY_BROKER_ROLE_CHANGED and notice.is_oneway
    h = notice.decode_header(NotifyBrokerRoleChangedRequestHeader)
    assert (h.masterBrokerId, h.masterAddress, h.masterEpoch, h.syncStateSetEpoch) == (2, ADDR[2], 2, 3)
    assert SyncStateSet.decode(notice.body) == SyncStateSet(frozenset({2}), 3)


def test_a_closed_master_connection_triggers_the_election_at_once():
    clock, manager, p, sent = setup()
    ch1, ch2 = FakeChannel(), FakeChannel()
    heartbeat(p, 1, ch1)
    heartbeat(p, 2, ch2)
    join(p, 1)
    join(p, 2)
    call(p, RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(C, N, 1, False))
    call(p, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, AlterSyncStateSetRequestHeader(N, 1, 1),
         SyncStateSet(frozenset({1, 2}), 1).encode())
    manager.heartbeats.on_channel_closed(ch1)
    assert manager.state.sync_state[N].masterBrokerId == 2


def test_a_follower_answers_not_leader_but_takes_heartbeats_and_metadata():
    clock, manager, p, sent = setup(leader=False)
    r = call(p, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(C, N))
    assert (r.code, r.remark) == (ResponseCode.CONTROLLER_NOT_LEADER, "The controller is not in leader state")
    assert heartbeat(p, 1, FakeChannel()).code == ResponseCode.SUCCESS
    meta = call(p, RequestCode.CONTROLLER_GET_METADATA_INFO).decode_header(GetMetaDataResponseHeader)
    assert meta.isLeader is False


def test_heartbeat_without_broker_id_is_refused():
    clock, manager, p, sent = setup()
    h = BrokerHeartbeatRequestHeader(C, ADDR[1], N, None)
    r = call(p, RequestCode.BROKER_HEARTBEAT, h)
    assert (r.code, r.remark) == (ResponseCode.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")


def test_heartbeat_keeps_the_highest_epoch_and_offset():
    clock, manager, p, sent = setup()
    ch = FakeChannel()
    heartbeat(p, 1, ch, epoch=2, offset=50)
    heartbeat(p, 1, ch, epoch=1, offset=900)
    info = manager.heartbeats.live_info(C, N, 1)
    assert (info.epoch, info.maxOffset) == (2, 50)
    heartbeat(p, 1, ch, epoch=2, offset=60)
    assert manager.heartbeats.live_info(C, N, 1).maxOffset == 60


def test_controller_config_get_and_update_with_the_black_list():
    clock, manager, _, sent = setup()
    config_objects = [manager.config]
    p = ControllerRequestProcessor(manager, lambda: "notifyBrokerRoleChanged=true\n", lambda: config_objects)
    r = call(p, RequestCode.GET_CONTROLLER_CONFIG)
    assert (r.code, r.body) == (ResponseCode.SUCCESS, b"notifyBrokerRoleChanged=true\n")
    r = call(p, RequestCode.UPDATE_CONTROLLER_CONFIG, body=b"configStorePath=/tmp/x\n")
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    r = call(p, RequestCode.UPDATE_CONTROLLER_CONFIG, body=b"notifyBrokerRoleChanged=false\nscanInactiveMasterInterval=700\n")
    assert r.code == ResponseCode.SUCCESS
    assert manager.config.notifyBrokerRoleChanged is False and manager.config.scanInactiveMasterInterval == 700
