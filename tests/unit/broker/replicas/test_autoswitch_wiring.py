"""A controller-mode broker replicates through AutoSwitch HA (issue 28, slice 3), on a task.Clock:
its store's AutoSwitchHAService is what the replicas manager drives and what the tap listens with
on haListenPort (no classic HAService anywhere); a role from the controller reaches the service; a
replica learns its master's HA address from the name server's registration answer, as Java 5.3.3
does in controller mode; the service's in-sync set changes are reported by ALTER_SYNC_STATE_SET."""
from __future__ import annotations

import json
from typing import Any

from twisted.application.internet import StreamServerEndpointService
from twisted.internet import defer, task

from rmqpy.broker import tap
from rmqpy.broker.controller import BrokerController
from rmqpy.broker.replicas.autoswitch import AutoSwitchReplication
from rmqpy.protocol.bodies.controller import SyncStateSet
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.message import encode_batch_body
from rmqpy.store.ha.autoswitch.service import AutoSwitchHAService
from rmqpy.store.ha.replication import Replication
from rmqpy.store.ha.service import HAService
from rmqpy.store.role import BrokerRole, RoleState
from tests.unit.broker.helpers import FakeChannel, call, send_request
from tests.unit.broker.replicas.fake_controller import FakeController
from tests.unit.broker.replicas.test_broker_controller_mode import controller_mode_settings, notify

C1 = "10.0.0.1:9878"
NS = "10.0.0.9:9876"
OTHER = "127.0.0.1:20911"  # another replica of the set, elected in epoch 2
OTHER_HA = "127.0.0.1:20912"


def _broker(tmp_path: Any, **store: Any) -> tuple[task.Clock, BrokerController, FakeController]:
    clock = task.Clock()
    clock.advance(1_700_000_000)
    settings = controller_mode_settings(tmp_path)
    for key, value in store.items():
        setattr(settings.store, key, value)
    controller = FakeController(leader=C1, peers=[C1])
    broker = BrokerController(settings, clock)
    broker.namesrv_client = controller  # type: ignore[assignment]  # name server and controller in one fake
    broker.initialize()
    return clock, broker, controller


def _stop(clock: task.Clock, broker: BrokerController) -> None:
    stopped = broker.shutdown()
    clock.pump([1.0] * 3)
    assert stopped.called


def test_the_broker_replicates_through_its_stores_autoswitch_service(tmp_path) -> None:
    clock, broker, controller = _broker(tmp_path)
    ha = broker.autoswitch_ha
    assert isinstance(ha, AutoSwitchHAService)
    assert broker.replicas_manager is not None and broker.replicas_manager.ha is ha
    assert isinstance(broker.replication, AutoSwitchReplication) and broker.replication.service is ha
    dialled: list[str] = []
    ha._connect = lambda addr, proto: (dialled.append(addr), defer.Deferred())[1]  # never connects
    broker.start()
    try:
        clock.pump([1.0] * 10)
        # elected: the service is the master of epoch 1 from offset 0, in its epoch file
        assert broker.role == RoleState(BrokerRole.SYNC_MASTER, 0)
        assert ha.is_master and not ha.is_slave and ha.local_broker_id == 1
        assert [(e.epoch, e.start_offset) for e in ha.epoch_entries()] == [(1, 0)]
        assert (tmp_path / "store" / "epochFileCheckpoint").exists()
        assert ha.local_sync_state_set() == {1}
        assert call(broker, FakeChannel(), send_request("T")).code == ResponseCode.SUCCESS
        assert broker.message_store.get_max_phy_offset() > 0
        assert broker.message_store.replica_wait is None  # default inSyncReplicas: acked at once, as Java
        # the broker registers its own HA address with the name server
        assert controller.of(RequestCode.REGISTER_BROKER)[-1].ext_fields["haServerAddr"] == "127.0.0.1:10912"
        info = call(broker, FakeChannel(), RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
        table = json.loads(info.body)["table"]
        assert table["haSlaveConnections"] == "0" and table["haSyncStateSet"] == "1", table

        # another replica elected (epoch 2), registered with its HA address: this one becomes its
        # replica and dials the HA address the registration answer names
        controller.name_server["broker-a"][0] = OTHER
        controller.ha_server_addrs[OTHER] = OTHER_HA
        call(broker, FakeChannel(), notify(controller, 2, OTHER, 2))
        clock.pump([0.0, 0.0])
        assert broker.role == RoleState(BrokerRole.SLAVE, 1)
        assert ha.is_slave and not ha.is_master and ha.client is not None
        assert ha.client.master_address == OTHER and ha.client.master_ha_address == OTHER_HA
        assert dialled == [OTHER_HA]
        table = json.loads(call(broker, FakeChannel(), RemotingCommand.request(
            RequestCode.GET_BROKER_RUNTIME_INFO)).body)["table"]
        assert table["haMasterAddress"] == OTHER_HA and table["haConnectedToMaster"] == "false", table

        # elected again (epoch 3): master, the client gone, the epoch appended where the store ends
        call(broker, FakeChannel(), notify(controller, 1, broker.broker_addr, 3))
        assert ha.is_master and ha.client is None
        assert [e.epoch for e in ha.epoch_entries()] == [1, 3]
        assert ha.epoch_entries()[-1].start_offset == broker.message_store.get_max_phy_offset()
    finally:
        _stop(clock, broker)


def test_in_sync_set_changes_of_the_service_are_reported_to_the_controller(tmp_path) -> None:
    clock, broker, controller = _broker(tmp_path)
    ha = broker.autoswitch_ha
    assert ha is not None
    broker.start()
    try:
        clock.pump([1.0] * 10)
        assert ha.is_master and controller.sync_state_set == {1}
        assert call(broker, FakeChannel(), send_request("T")).code == ResponseCode.SUCCESS
        alters = len(controller.of(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET))

        # replica 2 reports the master's end: the set should expand, the master says so
        ha.maybe_expand_sync_state_set(2, broker.message_store.get_max_phy_offset())
        clock.pump([0.0, 0.0, 0.0])
        sent = controller.of(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET)[alters:]
        assert [SyncStateSet.decode(r.body).syncStateSet for r in sent] == [{1, 2}]
        assert controller.sync_state_set == {1, 2}
        # the controller's answer is handed back to the service and the manager
        assert ha.local_sync_state_set() == {1, 2} and not ha.is_synchronizing_sync_state_set
        assert broker.replicas_manager is not None and broker.replicas_manager.sync_state_set == {1, 2}

        # replica 2's connection goes: the set should shrink to the master alone
        class Gone:
            slave_id = 2
        ha.connection_lost(Gone())  # type: ignore[arg-type]
        clock.pump([0.0, 0.0, 0.0])
        sent = controller.of(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET)[alters:]
        assert [SyncStateSet.decode(r.body).syncStateSet for r in sent] == [{1, 2}, {1}]
        assert ha.local_sync_state_set() == {1} and controller.sync_state_set == {1}
    finally:
        _stop(clock, broker)


def test_the_tap_listens_on_ha_listen_port_with_the_autoswitch_service(tmp_path) -> None:
    conf = tmp_path / "b.conf"
    conf.write_text(f"storePathRootDir={tmp_path}/store\nlistenPort=20911\nmappedFileSizeCommitLog=1048576\n"
                    f"namesrvAddr=\nenableControllerMode=true\ncontrollerAddr={C1}\n")
    opts = tap.Options()
    opts.parseOptions(["-c", str(conf)])
    svc = tap.makeService(opts, reactor=task.Clock())
    try:
        ports = {s.endpoint._port: s.factory for s in svc if isinstance(s, StreamServerEndpointService)}
        assert sorted(ports) == [20909, 20911, 20912]
        assert isinstance(ports[20912], AutoSwitchHAService) and ports[20912] is svc.controller.autoswitch_ha
        assert not any(isinstance(f, HAService) for f in ports.values())
        assert not isinstance(svc.controller.replication, Replication)  # nothing classic
    finally:
        svc.controller.message_store.shutdown()


def test_with_all_ack_in_sync_state_set_a_sync_put_waits_for_every_in_sync_replica(tmp_path) -> None:
    clock, broker, controller = _broker(tmp_path)
    broker.store_config.allAckInSyncStateSet = True
    ha = broker.autoswitch_ha
    assert ha is not None and broker.replicas_manager is not None
    broker.start()
    try:
        clock.pump([1.0] * 10)
        assert ha.is_master and broker.message_store.replica_wait is not None
        # the master alone in the set: answered at once
        assert call(broker, FakeChannel(), send_request("T")).code == ResponseCode.SUCCESS

        # replica 2 connected and in the controller's set
        conn = ha.buildProtocol(None)
        assert conn is not None
        conn.slave_id, conn.slave_ack_offset = 2, broker.message_store.get_max_phy_offset()
        broker.replicas_manager.change_sync_state_set(frozenset({1, 2}), 99)
        assert ha.local_sync_state_set() == {1, 2}

        channel = FakeChannel()
        assert call(broker, channel, send_request("T")) is None  # waits for replica 2
        end = broker.message_store.get_max_phy_offset()
        conn.slave_ack_offset = end - 1
        ha.replica_acked(conn, end - 1)
        assert channel.sent == []  # one byte short
        conn.slave_ack_offset = end
        ha.replica_acked(conn, end)
        assert [r.code for r in channel.sent] == [ResponseCode.SUCCESS]

        # not acknowledged within slaveTimeout: FLUSH_SLAVE_TIMEOUT
        late = FakeChannel()
        assert call(broker, late, send_request("T")) is None
        clock.advance(broker.store_config.slaveTimeout / 1000.0)
        assert [r.code for r in late.sent] == [ResponseCode.FLUSH_SLAVE_TIMEOUT]

        # replica 3 of the set not connected: replica 2's ack is not enough, the put times out, as
        # Java's does while 3 is in the set
        broker.replicas_manager.change_sync_state_set(frozenset({1, 2, 3}), 100)
        gone = FakeChannel()
        assert call(broker, gone, send_request("T")) is None
        end = broker.message_store.get_max_phy_offset()
        conn.slave_ack_offset = end
        ha.replica_acked(conn, end)
        assert gone.sent == []
        clock.advance(broker.store_config.slaveTimeout / 1000.0)
        assert [r.code for r in gone.sent] == [ResponseCode.FLUSH_SLAVE_TIMEOUT]
    finally:
        _stop(clock, broker)


def test_with_in_sync_replicas_3_a_sync_put_waits_for_two_replicas_acks(tmp_path) -> None:
    """Java's GroupTransferService without allAckInSyncStateSet: inSyncReplicas counts the master and
    the connections that acknowledged the put's end, whether in the in-sync set or not."""
    clock, broker, controller = _broker(tmp_path)
    broker.store_config.inSyncReplicas = 3
    ha = broker.autoswitch_ha
    assert ha is not None
    broker.start()
    try:
        clock.pump([1.0] * 10)
        assert ha.is_master and broker.message_store.replica_wait is not None
        # the master alone: no one to acknowledge, FLUSH_SLAVE_TIMEOUT after slaveTimeout (not at once)
        alone = FakeChannel()
        assert call(broker, alone, send_request("T")) is None
        clock.advance(broker.store_config.slaveTimeout / 1000.0)
        assert [r.code for r in alone.sent] == [ResponseCode.FLUSH_SLAVE_TIMEOUT]
        a, b = ha.buildProtocol(None), ha.buildProtocol(None)
        assert a is not None and b is not None
        a.slave_id, b.slave_id = 2, 3
        channel = FakeChannel()
        assert call(broker, channel, send_request("T")) is None
        end = broker.message_store.get_max_phy_offset()
        a.slave_ack_offset = end
        ha.replica_acked(a, end)
        assert channel.sent == []  # two of three: not yet
        b.slave_ack_offset = end
        ha.replica_acked(b, end)
        assert [r.code for r in channel.sent] == [ResponseCode.SUCCESS]
    finally:
        _stop(clock, broker)


def test_with_min_in_sync_replicas_a_put_is_refused_before_the_write_while_the_set_is_smaller(tmp_path) -> None:
    clock, broker, controller = _broker(tmp_path)
    broker.store_config.minInSyncReplicas = 2
    ha = broker.autoswitch_ha
    assert ha is not None and broker.replicas_manager is not None
    broker.start()
    try:
        clock.pump([1.0] * 10)
        assert ha.is_master and ha.local_sync_state_set() == {1}
        end = broker.message_store.get_max_phy_offset()
        refused = call(broker, FakeChannel(), send_request("T"))
        assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR, "in-sync replicas not enough")
        body = encode_batch_body([(0, f"m{i}".encode(), {"UNIQ_KEY": f"U{i}"}) for i in range(2)])
        refused = call(broker, FakeChannel(), send_request("T", body, code=RequestCode.SEND_BATCH_MESSAGE))
        assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR, "in-sync replicas not enough")
        assert broker.message_store.get_max_phy_offset() == end  # nothing written
        # a put that does not wait for the store is not checked (Java's needHandleHA)
        no_wait = send_request("T")
        no_wait.ext_fields["i"] = "WAIT\x01false\x02"
        assert call(broker, FakeChannel(), no_wait).code == ResponseCode.SUCCESS
        # replica 2 in the set: 2 in sync, the put goes through
        broker.replicas_manager.change_sync_state_set(frozenset({1, 2}), 99)
        assert call(broker, FakeChannel(), send_request("T")).code == ResponseCode.SUCCESS
    finally:
        _stop(clock, broker)


def test_retention_drops_the_epochs_whose_data_it_deleted(tmp_path) -> None:
    import os

    clock, broker, controller = _broker(tmp_path, mappedFileSizeCommitLog=64 * 1024, fileReservedTime=1)
    ha = broker.autoswitch_ha
    assert ha is not None
    ha._connect = lambda addr, proto: defer.Deferred()  # the replica's dial never connects
    store: Any = broker.message_store

    broker.start()
    try:
        clock.pump([1.0] * 10)
        size = store.commit_log.queue.mapped_file_size

        def fill(until: int) -> None:
            while store.get_max_phy_offset() < until:
                assert call(broker, FakeChannel(), send_request("T")).code == ResponseCode.SUCCESS

        fill(size + size // 2)  # epoch 1 ends inside the second file
        call(broker, FakeChannel(), notify(controller, 2, OTHER, 2))
        call(broker, FakeChannel(), notify(controller, 1, broker.broker_addr, 3))
        epoch3 = ha.epoch_entries()[-1].start_offset
        assert [(e.epoch, e.start_offset) for e in ha.epoch_entries()] == [(1, 0), (3, epoch3)]
        fill(3 * size + 100)
        files = store.commit_log.queue.files
        for f in files[:-1]:
            f.flushed_position = f.wrote_position
        old = os.path.getmtime(files[0].path) - 7200
        for f in files[:2]:
            os.utime(f.path, (old, old))
        deleted: list[int] = []
        store.delete_expired_files(force_time=True).addCallback(deleted.append)
        assert deleted == [2] and store.get_min_phy_offset() == 2 * size > epoch3
        assert [(e.epoch, e.start_offset) for e in ha.epoch_entries()] == [(3, epoch3)]
    finally:
        _stop(clock, broker)
