"""The replicas manager against an in-memory controller on a task.Clock: the start sequence of a
5.3.3 broker (leader, broker id, registration, heartbeat, election), the periodic work, role
notifications and bad answers."""
from __future__ import annotations

from typing import Any

import pytest
from twisted.internet import defer, task
from twisted.logger import LogLevel

from rmqpy.broker.config import BrokerConfig
from rmqpy.broker.processor.replicas import ReplicasProcessor
from rmqpy.broker.replicas.client import ControllerClient
from rmqpy.broker.replicas.ha import MasterOnlyHA
from rmqpy.broker.replicas.identity import BrokerIdentity, identity_files
from rmqpy.broker.replicas.manager import RegisterState, ReplicasManager, State
from rmqpy.protocol.bodies.controller import EpochEntryCache, SyncStateSet
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.controller import NotifyBrokerRoleChangedRequestHeader
from rmqpy.store.config import MessageStoreConfig
from rmqpy.store.role import BrokerRole, set_role
from tests.unit.broker.replicas.fake_controller import FakeController

C1, C2 = "10.0.0.1:9878", "10.0.0.2:9878"
ADDR = "127.0.0.1:10911"


class Host:
    """The broker as the replicas manager sees it; it records what it was told."""

    def __init__(self) -> None:
        self.broker_config = BrokerConfig(brokerIP1="127.0.0.1", brokerName="broker-a", brokerClusterName="c",
                                          enableControllerMode=True, controllerAddr=f"{C1};{C2}")
        self.store_config = MessageStoreConfig()
        self.broker_addr = ADDR
        self.roles: list[tuple[BrokerRole, int, str | None]] = []
        self.fenced: list[bool] = []
        self.versions: list[int] = []
        self.registrations = 0

    def apply_controller_role(self, role: BrokerRole, broker_id: int, master_address: str | None) -> None:
        set_role(self.store_config, role)
        self.broker_config.brokerId = broker_id
        self.roles.append((role, broker_id, master_address))

    def next_data_version(self, state_version: int) -> None:
        self.versions.append(state_version)

    def set_fenced(self, fenced: bool) -> None:
        self.fenced.append(fenced)

    def register_broker_all(self) -> defer.Deferred[Any]:
        self.registrations += 1
        return defer.succeed(None)


class Offsets:
    def __init__(self) -> None:
        self.max = 0

    def __call__(self) -> int:
        return self.max


def build(tmp_path, controller: FakeController, host: Host | None = None):
    clock = task.Clock()
    clock.advance(1_700_000_000)
    host = host or Host()
    offsets = Offsets()
    ha = MasterOnlyHA(offsets)
    client = ControllerClient(controller.invoke, controller.invoke_oneway, lambda: int(clock.seconds() * 1000))
    identity, temp = identity_files(str(tmp_path / "brokerIdentity"))
    manager = ReplicasManager(host, client, ha, clock, identity, temp, controller.connection)
    return manager, host, clock, ha, offsets


def _lines(events: list[dict], level: LogLevel | None = None) -> list[str]:
    from twisted.logger import formatEvent
    return [formatEvent(e) for e in events if level is None or e.get("log_level") == level]


def test_first_start_takes_an_id_registers_elects_itself_and_becomes_sync_master(tmp_path):
    controller = FakeController(leader=C2, peers=[C1, C2])
    manager, host, clock, ha, offsets = build(tmp_path, controller)
    offsets.max = 4096
    manager.startService()
    assert manager.started is not None and manager.started.called and manager.started.result is True
    codes = controller.codes()
    # the leader from the first reachable controller, then id, apply, register, one heartbeat per controller, elect
    assert codes == [RequestCode.CONTROLLER_GET_METADATA_INFO, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                     RequestCode.CONTROLLER_APPLY_BROKER_ID, RequestCode.CONTROLLER_REGISTER_BROKER,
                     RequestCode.BROKER_HEARTBEAT, RequestCode.BROKER_HEARTBEAT, RequestCode.CONTROLLER_ELECT_MASTER]
    assert [a for a, r in controller.requests if r.code != RequestCode.BROKER_HEARTBEAT][1:] == [C2] * 4
    apply = controller.of(RequestCode.CONTROLLER_APPLY_BROKER_ID)[0].ext_fields
    assert apply["appliedBrokerId"] == "1" and apply["registerCheckCode"] == f"{ADDR};1700000000000"
    assert apply["clusterName"] == "c" and apply["brokerName"] == "broker-a"
    register = controller.of(RequestCode.CONTROLLER_REGISTER_BROKER)[0].ext_fields
    assert {k: register[k] for k in ("clusterName", "brokerName", "brokerId", "brokerAddress")} == {
        "clusterName": "c", "brokerName": "broker-a", "brokerId": "1", "brokerAddress": ADDR}
    elect = controller.of(RequestCode.CONTROLLER_ELECT_MASTER)[0].ext_fields
    assert {k: elect[k] for k in ("clusterName", "brokerName", "brokerId", "designateElect")} == {
        "clusterName": "c", "brokerName": "broker-a", "brokerId": "1", "designateElect": "false"}
    beat = controller.of(RequestCode.BROKER_HEARTBEAT)[0]
    assert beat.is_oneway and beat.ext_fields == {
        "clusterName": "c", "brokerAddr": ADDR, "brokerName": "broker-a", "brokerId": "1", "epoch": "-1",
        "maxOffset": "4096", "confirmOffset": "4096", "heartbeatTimeoutMills": "10000",
        "electionPriority": "2147483647"}
    # the files as Java leaves them: the identity, no temp file
    assert (tmp_path / "brokerIdentity").read_bytes() == b"c#broker-a#1"
    assert not (tmp_path / "brokerIdentity-temp").exists()
    # the role through the switch, SYNC_MASTER with brokerId 0; unfenced; data version moved to epoch 1
    assert host.roles == [(BrokerRole.SYNC_MASTER, 0, None)]
    assert host.fenced == [False] and host.versions == [1] and host.registrations == 1
    assert manager.state is State.RUNNING and manager.register_state is RegisterState.REGISTERED
    assert (manager.master_broker_id, manager.master_epoch, manager.sync_state_set) == (1, 1, frozenset({1}))
    assert [(e.epoch, e.start_offset) for e in ha.epoch_entries()] == [(1, 4096)]
    manager.stopService()


def test_periodic_heartbeats_replica_info_and_no_alter_while_the_set_is_unchanged(tmp_path):
    controller = FakeController(leader=C1, peers=[C1, C2])
    manager, host, clock, ha, offsets = build(tmp_path, controller)
    manager.startService()
    controller.requests.clear()
    clock.pump([1.0] * 12)
    codes = controller.codes()
    assert codes.count(RequestCode.BROKER_HEARTBEAT) == 2 * 12  # every brokerHeartbeatInterval, both controllers
    beats = controller.of(RequestCode.BROKER_HEARTBEAT)
    assert {b.ext_fields["epoch"] for b in beats} == {"1"}
    # replica info at 3 s then every 5 s (3, 8), metadata at 3 s then every 10 s; the set {1} is never reported
    assert codes.count(RequestCode.CONTROLLER_GET_REPLICA_INFO) == 2
    assert codes.count(RequestCode.CONTROLLER_GET_METADATA_INFO) == 1
    assert RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET not in codes
    # a slave in sync (the HA side says so): reported once, then the controller's set is held
    ha.set_sync_state_set(frozenset({1, 2}))
    clock.pump([1.0] * 12)
    alters = controller.of(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET)
    assert len(alters) == 1 and SyncStateSet.decode(alters[0].body) == SyncStateSet(frozenset({1, 2}), 1)
    assert alters[0].ext_fields["masterBrokerId"] == "1" and alters[0].ext_fields["masterEpoch"] == "1"
    assert manager.sync_state_set == frozenset({1, 2}) and manager.sync_state_set_epoch == 2
    manager.stopService()


def test_a_restart_reads_its_id_from_the_file_and_takes_the_master_the_registration_names(tmp_path):
    controller = FakeController(leader=C1, peers=[C1])
    controller.addresses[1], controller.check_codes[1] = ADDR, "x"
    controller.master, controller.master_epoch, controller.sync_state_set = 1, 4, frozenset({1})
    controller.sync_state_set_epoch = 6
    (tmp_path / "brokerIdentity").write_text("c#broker-a#1")
    manager, host, clock, ha, _ = build(tmp_path, controller)
    host.broker_config.controllerAddr = C1
    manager.startService()
    assert RequestCode.CONTROLLER_GET_NEXT_BROKER_ID not in controller.codes()
    assert RequestCode.CONTROLLER_ELECT_MASTER not in controller.codes()
    assert host.roles == [(BrokerRole.SYNC_MASTER, 0, None)] and manager.master_epoch == 4
    assert manager.sync_state_set_epoch == 6 and manager.state is State.RUNNING
    manager.stopService()


def test_role_notifications_switch_the_role_and_older_epochs_are_ignored(tmp_path):
    controller = FakeController(leader=C1, peers=[C1])
    manager, host, clock, ha, _ = build(tmp_path, controller)
    host.broker_config.controllerAddr = C1
    manager.startService()
    processor = ReplicasProcessor(lambda: manager, clock)

    def notify(master_id: int, addr: str, epoch: int, sss_epoch: int, ids: set[int]) -> RemotingCommand:
        request = RemotingCommand.request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED,
                                          NotifyBrokerRoleChangedRequestHeader(addr, epoch, sss_epoch, master_id),
                                          SyncStateSet(frozenset(ids), sss_epoch).encode(), oneway=True)
        return processor.process_request(None, request)  # type: ignore[arg-type]

    asked = len(controller.of(RequestCode.CONTROLLER_GET_REPLICA_INFO))
    controller.elected(2, "127.0.0.1:20911", 2)  # the controller elected another replica
    assert notify(2, "127.0.0.1:20911", 2, 2, {2}).code == ResponseCode.SUCCESS
    assert host.roles[-1] == (BrokerRole.SLAVE, 1, "127.0.0.1:20911")
    assert (manager.master_broker_id, manager.master_epoch) == (2, 2)
    assert len(controller.of(RequestCode.CONTROLLER_GET_REPLICA_INFO)) == asked + 1  # it asked before acting
    notify(1, ADDR, 1, 9, {1})  # an older epoch: nothing, and nothing asked
    assert len(host.roles) == 2 and len(controller.of(RequestCode.CONTROLLER_GET_REPLICA_INFO)) == asked + 1
    controller.elected(1, ADDR, 3, 3, frozenset({1}))
    notify(1, ADDR, 3, 3, {1})
    assert host.roles[-1] == (BrokerRole.SYNC_MASTER, 0, None) and manager.master_epoch == 3
    assert host.versions == [1, 2, 3] and host.registrations == 3
    epochs = processor.process_request(None, RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE))  # type: ignore[arg-type]
    cache = EpochEntryCache.decode(epochs.body)
    assert (cache.clusterName, cache.brokerName, cache.brokerId) == ("c", "broker-a", 0)
    assert [e.epoch for e in cache.epochList] == [1, 3]
    manager.stopService()


def test_a_forged_role_notification_changes_nothing_the_controller_did_not_decide(tmp_path):
    """Java applies NOTIFY_BROKER_ROLE_CHANGED's header as it comes; rmqpy asks the controller."""
    controller = FakeController(leader=C1, peers=[C1])
    manager, host, clock, ha, _ = build(tmp_path, controller)
    host.broker_config.controllerAddr = C1
    manager.startService()
    assert host.roles == [(BrokerRole.SYNC_MASTER, 0, None)] and manager.master_epoch == 1
    processor = ReplicasProcessor(lambda: manager, clock)
    # a stranger names itself master of epoch 9: the controller still says broker 1 of epoch 1
    forged = RemotingCommand.request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED,
                                     NotifyBrokerRoleChangedRequestHeader("10.6.6.6:10911", 9, 9, 7),
                                     SyncStateSet(frozenset({7}), 9).encode(), oneway=True)
    assert processor.process_request(None, forged).code == ResponseCode.SUCCESS  # type: ignore[arg-type]
    assert host.roles == [(BrokerRole.SYNC_MASTER, 0, None)]
    assert (manager.master_broker_id, manager.master_epoch, manager.master_address) == (1, 1, ADDR)
    assert controller.of(RequestCode.CONTROLLER_GET_REPLICA_INFO)  # it asked
    # the leader moved to C2: the notification's check finds it and asks there
    controller.peers.append(C2)
    controller.leader = C2
    manager.available[C2] = True
    controller.elected(2, "127.0.0.1:20911", 2)
    processor.process_request(None, RemotingCommand.request(  # type: ignore[arg-type]
        RequestCode.NOTIFY_BROKER_ROLE_CHANGED, NotifyBrokerRoleChangedRequestHeader("127.0.0.1:20911", 2, 2, 2),
        SyncStateSet(frozenset({2}), 2).encode(), oneway=True))
    assert host.roles[-1] == (BrokerRole.SLAVE, 1, "127.0.0.1:20911") and manager.controller_leader_address == C2
    manager.stopService()


def test_without_controller_mode_the_epoch_cache_is_refused_as_java_refuses_it():
    processor = ReplicasProcessor(lambda: None, task.Clock())
    answer = processor.process_request(None, RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE))  # type: ignore[arg-type]
    assert answer.code == ResponseCode.SYSTEM_ERROR and answer.remark == "this request only for controllerMode "


def test_no_leader_reachable_retries_every_5_s_fenced_then_starts(tmp_path, logged):
    controller = FakeController(leader=C1, peers=[C1], down=(C1,))
    manager, host, clock, ha, _ = build(tmp_path, controller)
    host.broker_config.controllerAddr = C1
    manager.startService()
    clock.pump([1.0] * 3)
    assert manager.state is State.INITIAL and host.roles == [] and manager.started is not None
    assert not manager.started.called
    assert any("Failed to init controller metadata" in line for line in _lines(logged, LogLevel.error))
    controller.down.clear()
    clock.pump([1.0] * 10)  # the scan finds it within 3 s, the retry within 5 s
    assert manager.started.called and manager.state is State.RUNNING
    assert host.roles == [(BrokerRole.SYNC_MASTER, 0, None)]
    manager.stopService()


def test_bad_answers_are_one_line_each_and_no_crash(tmp_path, logged):
    controller = FakeController(leader=C1, peers=[C1])
    manager, host, clock, ha, _ = build(tmp_path, controller)
    host.broker_config.controllerAddr = C1
    # an election refused with a code the broker does not take: no role, retried
    controller.override[RequestCode.CONTROLLER_ELECT_MASTER] = RemotingCommand(
        code=ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, remark="Failed to elect a new master", flag=1)
    manager.startService()
    assert host.roles == [] and not manager.started.called  # type: ignore[union-attr]
    errors = _lines(logged, LogLevel.error)
    assert any("Failed to try elect" in e and "CONTROLLER_ELECT_MASTER_FAILED (2012)" in e for e in errors), errors
    del controller.override[RequestCode.CONTROLLER_ELECT_MASTER]
    clock.advance(5)
    assert manager.state is State.RUNNING
    # replica info whose body is not JSON, then one whose header has a bad number: a warning each, still running
    controller.override[RequestCode.CONTROLLER_GET_REPLICA_INFO] = RemotingCommand(code=0, flag=1, body=b"{not json")
    clock.pump([1.0] * 8)
    controller.override[RequestCode.CONTROLLER_GET_REPLICA_INFO] = RemotingCommand(
        code=0, flag=1, ext_fields={"masterEpoch": "x1"}, body=b'{"syncStateSet":[1],"syncStateSetEpoch":1}')
    clock.pump([1.0] * 5)
    warnings = _lines(logged, LogLevel.warn)
    assert any("metadata" in w and "SyncStateSet body" in w for w in warnings), warnings
    assert any("metadata" in w and "masterEpoch" in w for w in warnings), warnings
    assert manager.state is State.RUNNING and host.roles == [(BrokerRole.SYNC_MASTER, 0, None)]
    manager.stopService()


def test_an_identity_file_of_another_broker_stops_the_registration(tmp_path, logged):
    (tmp_path / "brokerIdentity").write_text("other-cluster#broker-a#3")
    controller = FakeController(leader=C1, peers=[C1])
    manager, host, clock, ha, _ = build(tmp_path, controller)
    host.broker_config.controllerAddr = C1
    manager.startService()
    assert RequestCode.CONTROLLER_REGISTER_BROKER not in controller.codes() and host.roles == []
    assert any("clusterName: other-cluster in broker metadata" in e for e in _lines(logged, LogLevel.error))
    manager.stopService()


def test_an_id_taken_meanwhile_clears_the_temp_file_and_takes_the_next(tmp_path):
    controller = FakeController(leader=C1, peers=[C1])
    # a temp file left by a crash, for an id another broker has since applied for
    (tmp_path / "brokerIdentity-temp").write_text(f"c#broker-a#1#{ADDR};1")
    controller.addresses[1], controller.check_codes[1] = "127.0.0.1:30911", "127.0.0.1:30911;5"
    manager, host, clock, ha, _ = build(tmp_path, controller)
    host.broker_config.controllerAddr = C1
    manager.startService()
    clock.pump([0.5] * 4)
    assert (tmp_path / "brokerIdentity").read_text() == "c#broker-a#2"
    assert manager.broker_controller_id == 2 and not (tmp_path / "brokerIdentity-temp").exists()
    manager.stopService()


def test_identity_round_trip_in_javas_format(tmp_path):
    identity, temp = identity_files(str(tmp_path / "brokerIdentity"))
    identity.write(BrokerIdentity("DefaultCluster", "broker-a", 1))
    temp.write(BrokerIdentity("DefaultCluster", "broker-a", 2, "10.0.0.5:10911;1700000000123"))
    assert (tmp_path / "brokerIdentity").read_bytes() == b"DefaultCluster#broker-a#1"
    assert (tmp_path / "brokerIdentity-temp").read_bytes() == b"DefaultCluster#broker-a#2#10.0.0.5:10911;1700000000123"
    assert not (tmp_path / "brokerIdentity.bak").exists()  # Java deletes the file before string2File
    again, again_temp = identity_files(str(tmp_path / "brokerIdentity"))
    assert again.read() == BrokerIdentity("DefaultCluster", "broker-a", 1)
    assert again_temp.read() == BrokerIdentity("DefaultCluster", "broker-a", 2, "10.0.0.5:10911;1700000000123")
    again_temp.clear()
    assert not (tmp_path / "brokerIdentity-temp").exists() and again_temp.read() is None
    (tmp_path / "brokerIdentity").write_text("DefaultCluster#broker-a")
    with pytest.raises(ValueError):
        again.read()
    assert not again.loaded
