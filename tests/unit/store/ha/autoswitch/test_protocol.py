"""AutoSwitch HA between real stores: the frames field by field as Java 5.3.3 lays them out, an
rmqpy master and an rmqpy replica joined by in-memory transports on one task.Clock, and the
truncation of a replica whose log went another way."""
from __future__ import annotations

import struct

import pytest
from twisted.internet import defer
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from rmqpy.store.epoch import EpochEntry, read_epoch_file
from rmqpy.store.ha.autoswitch.api import AutoSwitchSettings
from rmqpy.store.ha.autoswitch.client import AutoSwitchHAClientProtocol
from rmqpy.store.ha.autoswitch.service import AutoSwitchHAService

from ...conftest import StoreHarness, msg

# Java 5.3.3, AutoSwitchHAClient / AutoSwitchHAConnection: every field big-endian
#   replica handshake: state(int) isSyncFromLastFile(short) isAsyncLearner(short) brokerId(long)
#   replica report:    state(int) maxOffset(long)
#   master handshake:  state(int) bodySize(int) maxOffset(long) lastEpoch(int), then (epoch int, start long)*
#   master transfer:   state(int) bodySize(int) offset(long) epoch(int) epochStart(long) confirm(long), body
HANDSHAKE, TRANSFER = 1, 2


def _service(h: StoreHarness, **kw) -> AutoSwitchHAService:
    assert h.store is not None
    settings = AutoSwitchSettings.from_store_config(h.store.config)
    for k, v in kw.items():
        setattr(settings, k, v)
    return AutoSwitchHAService(h.clock, h.store, settings, lambda fn, *a: defer.maybeDeferred(fn, *a))


class Wire:
    """A master service and a replica service; ``connect`` joins them by two StringTransports."""

    def __init__(self, master: AutoSwitchHAService, replica: AutoSwitchHAService, clock) -> None:
        self.master, self.replica, self.clock = master, replica, clock
        self.links: list[tuple[object, StringTransport, object, StringTransport]] = []
        replica._connect = self.connect

    def connect(self, address, proto):
        conn = self.master.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1))
        mt = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 2))
        st = StringTransport()
        conn.makeConnection(mt)
        proto.makeConnection(st)
        self.links.append((conn, mt, proto, st))
        return defer.succeed(proto)

    def pump(self, rounds: int = 400) -> None:
        for _ in range(rounds):
            moved = False
            for conn, mt, proto, st in self.links:
                for t, peer in ((st, conn), (mt, proto)):
                    data = t.value()
                    t.clear()
                    if data and t.connected:
                        peer.dataReceived(data)
                        moved = True
                    if t.disconnecting and t.connected:
                        t.connected = False
                        conn.connectionLost(None)
                        proto.connectionLost(None)
            self.clock.advance(0)
            if not moved:
                self.clock.advance(0.1)
                if not any(mt.value() or st.value() for _, mt, _, st in self.links):
                    return


def _pair(tmp_path):
    m = StoreHarness(tmp_path / "m")
    r = StoreHarness(tmp_path / "r")
    r.clock = m.clock
    m.open()
    r.open()
    return m, r


def _files(root):
    return {p.name: p.read_bytes() for p in sorted((root / "commitlog").iterdir())}


def _put(h, n, start=0, body=b"", qid=None):
    for i in range(start, start + n):
        h.put(msg(qid=(i % 3) if qid is None else qid, body=body or bytes([i % 251]) * (80 + i % 150),
                  keys=f"k{i}"))


def test_master_frames_field_by_field(tmp_path):
    m = StoreHarness(tmp_path / "m")
    m.open()
    svc = _service(m, haTransferBatchSize=4096)
    svc.change_to_master(3)
    assert svc.role_change.result == EpochEntry(3, 0)
    _put(m, 50)
    switch = m.store.get_max_phy_offset()
    svc.change_to_master_when_last_role_is_master(4)
    assert svc.epochs.last() == EpochEntry(4, switch)
    _put(m, 30, start=50)
    conn = svc.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1))
    t = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 2))
    conn.makeConnection(t)
    conn.dataReceived(struct.pack(">ihhq", HANDSHAKE, 0, 0, 7))
    end = m.store.get_max_phy_offset()
    assert t.value() == struct.pack(">iiqi", HANDSHAKE, 24, end, 4) + struct.pack(">iq", 3, 0) + \
        struct.pack(">iq", 4, switch)
    assert conn.slave_id == 7
    t.clear()
    conn.dataReceived(struct.pack(">iq", TRANSFER, 0)[:5])  # half a report: nothing yet
    assert t.value() == b"" and conn.slave_request_offset == -1
    conn.dataReceived(struct.pack(">iq", TRANSFER, 0)[5:])
    out, pos, seen = t.value(), 0, 0
    while pos < len(out):
        state, size, offset, epoch, epoch_start, confirm = struct.unpack_from(">iiqiqq", out, pos)
        # each frame's bytes lie in the epoch it names
        expected_epoch = (3, 0) if offset < switch else (4, switch)
        assert (state, offset, (epoch, epoch_start), confirm) == (TRANSFER, seen, expected_epoch, end)
        assert 0 < size <= 4096 and (offset >= switch or offset + size <= switch)
        assert out[pos + 36:pos + 36 + size] == m.store.get_commit_log_data(offset, size)
        seen += size
        pos += 36 + size
    assert seen == end and conn.slave_ack_offset == 0
    conn.dataReceived(struct.pack(">iq", TRANSFER, end))
    assert conn.slave_ack_offset == end


def test_replica_frames_field_by_field(tmp_path):
    m, r = _pair(tmp_path)
    _put(m, 20)
    end = m.store.get_max_phy_offset()
    svc = _service(r, syncFromLastFile=True, asyncLearner=True)
    sent: list[AutoSwitchHAClientProtocol] = []

    def connect(address, proto):
        sent.append(proto)
        proto.makeConnection(StringTransport())
        return defer.succeed(proto)

    svc._connect = connect
    svc.change_to_slave("m:10911", 5, 9, master_ha_address="127.0.0.1:10912")
    proto = sent[0]
    t = proto.transport
    assert t.value() == struct.pack(">ihhq", HANDSHAKE, 1, 1, 9)
    t.clear()
    # the master's answer, split in the middle of its header
    answer = struct.pack(">iiqi", HANDSHAKE, 24, end, 5) + struct.pack(">iq", 4, 0) + struct.pack(">iq", 5, 100)
    proto.dataReceived(answer[:11])
    assert t.value() == b""
    proto.dataReceived(answer[11:])
    assert t.value() == struct.pack(">iq", TRANSFER, 0)
    t.clear()
    data = m.store.get_commit_log_data(0, end)
    frame = struct.pack(">iiqiqq", TRANSFER, len(data), 0, 5, 0, end // 2) + data
    proto.dataReceived(frame)
    assert t.value() == struct.pack(">iq", TRANSFER, end)
    assert r.store.get_max_phy_offset() == end
    assert svc.confirm_offset() == end // 2
    assert svc.epoch_entries() == [EpochEntry(5, 0)]
    # only the records that end by the confirm offset are in the consume queues (Java's reput
    # stops at confirmOffset); a heartbeat with a higher confirm offset releases the rest
    confirmed = sum(1 for off, d in m.store.commit_log.iter_records(0) if off + d.size <= end // 2)
    assert 0 < confirmed < 20
    assert sum(r.store.get_max_offset_in_queue("T", q) for q in range(3)) == confirmed
    t.clear()
    proto.dataReceived(struct.pack(">iiqiqq", TRANSFER, 0, end, 5, 0, end))
    assert sum(r.store.get_max_offset_in_queue("T", q) for q in range(3)) == 20
    assert t.value() == b""  # nothing new to report
    # a frame that does not start at the replica's end closes the connection
    proto.dataReceived(struct.pack(">iiqiqq", TRANSFER, 0, end + 8, 5, 0, end))
    assert t.disconnecting


def test_new_replica_copies_the_master_over_epochs(tmp_path):
    """Epoch 1 then epoch 2 on the master: the replica's frames never cross the epoch end, its
    epoch file ends up as the master's, its commit log and consume queues equal."""
    m, r = _pair(tmp_path)
    ms = _service(m)
    ms.local_broker_id = 1
    ms.change_to_master(1)
    _put(m, 300)
    ms.change_to_master_when_last_role_is_master(2)
    _put(m, 300, start=300)
    rs = _service(r)
    wire = Wire(ms, rs, m.clock)
    ms.set_sync_state_set({1})
    heard: list[frozenset[int]] = []
    ms.add_sync_state_set_listener(heard.append)
    rs.change_to_slave("m:10911", 2, 2, master_ha_address="127.0.0.1:10912")
    wire.pump()
    end = m.store.get_max_phy_offset()
    assert len(m.store.commit_log.queue.files) == 3
    assert r.store.get_max_phy_offset() == end
    assert _files(m.root) == _files(r.root)
    assert rs.epoch_entries() == ms.epoch_entries()
    assert read_epoch_file(str(r.root / "epochFileCheckpoint")) == read_epoch_file(str(m.root / "epochFileCheckpoint"))
    for q in range(3):
        assert r.store.get_max_offset_in_queue("T", q) == m.store.get_max_offset_in_queue("T", q) == 200
    # caught up: the master wants the replica in its in-sync set
    assert heard and heard[-1] == frozenset({1, 2})
    assert ms.sync_state_set() == frozenset({1, 2}) and ms.in_sync_replicas_nums() == 2
    [info] = ms.replicas()
    assert (info.broker_id, info.ack_offset) == (2, end)
    # new puts flow on; the replica's confirm offset follows the master's
    _put(m, 10, start=600)
    wire.pump()
    assert r.store.get_max_phy_offset() == m.store.get_max_phy_offset()
    assert rs.confirm_offset() == m.store.get_max_phy_offset()
    # the controller agreed; the replica leaves: the set should shrink
    ms.set_sync_state_set({1, 2})
    conn, mt, proto, st = wire.links[0]
    mt.loseConnection()
    wire.pump()
    assert heard[-1] == frozenset({1})


def test_diverged_replica_is_truncated_to_the_consistent_point(tmp_path):
    """A was master in epoch 1, B copied all of it; A, re-elected in epoch 2, wrote more that B
    did not copy; B became master of epoch 3 and wrote its own records. A, now B's replica, cuts
    its log where epoch 1 ended on B (commit log, consume queues, index), drops its epoch 2, and
    copies B's epoch 3."""
    a, b = _pair(tmp_path)
    sa, sb = _service(a), _service(b)
    sa.change_to_master(1)
    _put(a, 200)
    wire = Wire(sa, sb, a.clock)
    sb.change_to_slave("a:10911", 1, 2, master_ha_address="127.0.0.1:10912")
    wire.pump()
    shared = a.store.get_max_phy_offset()
    assert b.store.get_max_phy_offset() == shared
    sb.shutdown()
    wire.pump()
    sa.change_to_master_when_last_role_is_master(2)
    assert sa.epochs.last() == EpochEntry(2, shared)
    _put(a, 150, start=200, qid=1)  # only A has these
    a_end = a.store.get_max_phy_offset()
    sb.change_to_master(3)
    assert sb.role_change.result == EpochEntry(3, shared)
    _put(b, 100, start=1000, qid=2)  # only B has these
    wire2 = Wire(sb, sa, a.clock)
    sa.change_to_slave("b:10911", 3, 1, master_ha_address="127.0.0.1:10913")
    wire2.pump()
    client = sa.client
    assert client is not None and client.last_truncate_offset == shared < a_end
    assert a.store.get_max_phy_offset() == b.store.get_max_phy_offset()
    assert _files(a.root) == _files(b.root)
    assert sa.epoch_entries() == sb.epoch_entries() == [EpochEntry(1, 0, shared), EpochEntry(3, shared)]
    assert read_epoch_file(str(a.root / "epochFileCheckpoint")) == sb.epoch_entries()
    for q in range(3):
        assert a.store.get_max_offset_in_queue("T", q) == b.store.get_max_offset_in_queue("T", q)
    assert a.store.get_max_offset_in_queue("T", 1) == 67  # A's own 150 records of queue 1 are gone
    assert not a.store.query_message("T", "k300", 5, 0, 2**62).message_list  # one of A's own
    assert a.store.query_message("T", "k1099", 5, 0, 2**62).message_list  # one of B's, indexed anew
    # the store reopens with the cut log
    a.close()
    a.open()
    assert a.store.get_max_phy_offset() == b.store.get_max_phy_offset()


def test_replica_without_a_common_epoch_is_refused(tmp_path):
    a, b = _pair(tmp_path)
    sa, sb = _service(a), _service(b)
    sa.change_to_master(1)
    _put(a, 10)
    a_end = a.store.get_max_phy_offset()
    sb.change_to_master(2)
    _put(b, 10)
    wire = Wire(sb, sa, a.clock)
    sa.change_to_slave("b:10911", 2, 1, master_ha_address="127.0.0.1:10913")
    wire.pump(rounds=3)
    assert a.store.get_max_phy_offset() == a_end
    conn, mt, proto, st = wire.links[0]
    assert not st.connected or st.disconnecting
    assert sa.epoch_entries() == [EpochEntry(1, 0)]



def test_master_and_replica_over_tcp_loopback(tmp_path):
    """The same over real sockets on 127.0.0.1, one reactor: the replica connects with its own
    TCP client, copies, and follows new puts (the master's arrive listener wakes its connection)."""
    from twisted.internet import task

    from rmqpy.store.message_store import MessageStore
    from tests.fresh_reactor import run_in_fresh_reactor

    from ...conftest import small_config

    def store(r, name: str) -> MessageStore:
        s = MessageStore(small_config(tmp_path / name), ("127.0.0.1", 10911), r)
        assert s.load()
        s.start()
        return s

    async def scenario(r):
        m, rep = store(r, "m"), store(r, "r")
        settings = [AutoSwitchSettings.from_store_config(s.config) for s in (m, rep)]
        ms = AutoSwitchHAService(r, m, settings[0], m.blocking.run)
        rs = AutoSwitchHAService(r, rep, settings[1], rep.blocking.run)
        ms.change_to_master(1)
        await ms.role_change
        port = r.listenTCP(0, ms, interface="127.0.0.1")
        for i in range(300):
            m.put_message(msg(qid=i % 3, body=bytes([i % 251]) * 150, keys=f"k{i}"))
        rs.change_to_slave("127.0.0.1:10911", 1, 2, master_ha_address=f"127.0.0.1:{port.getHost().port}")
        for _ in range(200):
            if rep.get_max_phy_offset() == m.get_max_phy_offset():
                break
            await task.deferLater(r, 0.01, lambda: None)
        first = (rep.get_max_phy_offset(), m.get_max_phy_offset())
        for i in range(300, 320):
            m.put_message(msg(qid=0, body=b"later", keys=f"k{i}"))
        for _ in range(200):
            if rep.get_max_phy_offset() == m.get_max_phy_offset():
                break
            await task.deferLater(r, 0.01, lambda: None)
        second = (rep.get_max_phy_offset(), m.get_max_phy_offset(), [c.state for c in ms.connections])
        rs.shutdown()
        ms.shutdown()
        await port.stopListening()
        await rs.epochs.when_written()
        m.shutdown()
        rep.shutdown()
        return first, second

    (got, want), (got2, want2, states) = run_in_fresh_reactor(scenario, timeout=10)
    assert got == want > 0
    assert got2 == want2 > want
    assert [s.name for s in states] == ["TRANSFER"]
    assert _files(tmp_path / "m") == _files(tmp_path / "r")
    assert read_epoch_file(str(tmp_path / "r" / "epochFileCheckpoint")) == [EpochEntry(1, 0)]


@pytest.mark.parametrize("then", ["master", "reconnect"])
def test_replica_cuts_a_half_record(tmp_path, then):
    """Java's truncateInvalidMsg cuts a record the old master had not finished sending: when the
    replica becomes master (changeToMaster; the whole records waiting for a confirm offset are
    then dispatched and the new epoch starts at the cut), and before the replica connects again
    (READY state)."""
    m, r = _pair(tmp_path)
    _put(m, 6)
    offsets = [off for off, _ in m.store.commit_log.iter_records(0)]
    svc = _service(r)
    protos: list[AutoSwitchHAClientProtocol] = []

    def connect(address, proto):
        protos.append(proto)
        proto.makeConnection(StringTransport())
        return defer.succeed(proto)

    svc._connect = connect
    svc.change_to_slave("m:10911", 5, 9, master_ha_address="127.0.0.1:10912")
    proto = protos[0]
    proto.dataReceived(struct.pack(">iiqi", HANDSHAKE, 12, offsets[4], 5) + struct.pack(">iq", 5, 0))
    data = m.store.get_commit_log_data(0, offsets[4] + 10)  # four records and the head of a fifth
    proto.dataReceived(struct.pack(">iiqiqq", TRANSFER, len(data), 0, 5, 0, offsets[1]) + data)
    assert r.store.get_max_phy_offset() == offsets[4] + 10
    assert sum(r.store.get_max_offset_in_queue("T", q) for q in range(3)) == 1  # confirmed: one record
    assert r.store.incomplete_tail_offset() == offsets[4]
    if then == "reconnect":
        proto.transport.loseConnection()
        proto.connectionLost(None)
        r.clock.advance(5)
        assert len(protos) == 2 and r.store.get_max_phy_offset() == offsets[4]
        assert protos[1].transport.value() == struct.pack(">ihhq", HANDSHAKE, 0, 0, 9)
        assert sum(r.store.get_max_offset_in_queue("T", q) for q in range(3)) == 1
        return
    svc.change_to_master(6)
    entry = svc.role_change.result
    assert entry == EpochEntry(6, offsets[4])
    assert r.store.get_max_phy_offset() == offsets[4]
    assert sum(r.store.get_max_offset_in_queue("T", q) for q in range(3)) == 4
    assert svc.epoch_entries() == [EpochEntry(5, 0, offsets[4]), EpochEntry(6, offsets[4])]


def test_an_epoch_below_the_last_is_refused(tmp_path):
    """Java returns false from changeToMaster/changeToSlave for an epoch below its last; nothing changes."""
    h = StoreHarness(tmp_path / "s")
    h.open()
    svc = _service(h)
    svc.change_to_master(4)
    assert svc.role_change.result == EpochEntry(4, 0) and svc.is_master
    svc.change_to_slave("m:10911", 3, 2, master_ha_address="127.0.0.1:10912")
    assert svc.is_master and svc.client is None
    svc.change_to_master(2)
    assert svc.role_change.result is None
    svc.change_to_master_when_last_role_is_master(3)
    assert svc.epoch_entries() == [EpochEntry(4, 0)]


def test_settings_from_the_store_config_and_properties(tmp_path):
    from rmqpy.store.config import MessageStoreConfig

    config = MessageStoreConfig.from_properties({"storePathRootDir": str(tmp_path), "allAckInSyncStateSet": "true",
                                                 "haSendHeartbeatInterval": "1000"})
    s = AutoSwitchSettings.from_store_config(config, {"syncFromLastFile": "true", "haMaxTimeSlaveNotCatchup": "9000"})
    assert (s.storePathEpochFile, s.allAckInSyncStateSet, s.haSendHeartbeatInterval, s.syncFromLastFile,
            s.asyncLearner, s.haMaxTimeSlaveNotCatchup) == (
        str(tmp_path / "epochFileCheckpoint"), True, 1000, True, False, 9000)
    assert AutoSwitchSettings.from_store_config(config, {"storePathEpochFile": "/x/e"}).storePathEpochFile == "/x/e"
    # the broker's own file is enough: the keys are MessageStoreConfig's, as Java's
    config = MessageStoreConfig.from_properties({"storePathRootDir": str(tmp_path), "syncFromLastFile": "true",
                                                 "asyncLearner": "true", "haMaxTimeSlaveNotCatchup": "7000"})
    s = AutoSwitchSettings.from_store_config(config)
    assert (s.syncFromLastFile, s.asyncLearner, s.haMaxTimeSlaveNotCatchup) == (True, True, 7000)


def test_all_ack_confirm_offset_is_the_least_in_sync_ack(tmp_path):
    """allAckInSyncStateSet: a master's confirm offset is the least offset its in-sync replicas
    acknowledged (Java computeConfirmOffset), and stays put while one of them is not connected."""
    m, r = _pair(tmp_path)
    ms = _service(m, allAckInSyncStateSet=True)
    ms.set_local_broker_id(1)
    ms.change_to_master(1)
    _put(m, 30)
    rs = _service(r)
    wire = Wire(ms, rs, m.clock)
    ms.set_sync_state_set({1})
    assert ms.confirm_offset() == m.store.get_max_phy_offset()  # alone in the set: its max offset
    rs.change_to_slave("m:10911", 1, 2, master_ha_address="127.0.0.1:10912")
    wire.pump()
    ms.set_sync_state_set({1, 2})
    acked = m.store.get_max_phy_offset()
    assert ms.confirm_offset() == acked
    conn, mt, proto, st = wire.links[0]
    proto.transport.clear()
    proto._closed = True  # the replica stops reading: the master's puts are not acknowledged
    _put(m, 5, start=30)
    assert m.store.get_max_phy_offset() > acked
    ms.set_sync_state_set({1, 2})
    assert ms.confirm_offset() == acked
    mt.loseConnection()
    wire.pump()
    ms.set_sync_state_set({1, 2})  # the controller has not shrunk it yet: replica 2 not connected
    assert ms.confirm_offset() == acked


def test_heartbeats_housekeeping_and_shrink(tmp_path):
    """Idle, the master sends a heartbeat frame (body size 0, its epoch and confirm offset) every
    haSendHeartbeatInterval and the replica reports its offset as often; a replica that has not
    caught up for haMaxTimeSlaveNotCatchup leaves the in-sync set; a master silent for
    haHousekeepingInterval is dropped by the replica."""
    m, r = _pair(tmp_path)
    ms = _service(m)
    ms.set_local_broker_id(1)
    ms.change_to_master(1)
    _put(m, 10)
    rs = _service(r)
    wire = Wire(ms, rs, m.clock)
    rs.change_to_slave("m:10911", 1, 2, master_ha_address="127.0.0.1:10912")
    wire.pump()
    end = m.store.get_max_phy_offset()
    ms.set_sync_state_set({1, 2})
    conn, mt, proto, st = wire.links[0]
    m.clock.advance(5.2)
    beat, reports = mt.value(), st.value()
    assert beat == struct.pack(">iiqiqq", TRANSFER, 0, end, 1, 0, end)
    assert reports == struct.pack(">iq", TRANSFER, end)
    wire.pump()
    assert ms.maybe_shrink_sync_state_set() == {1, 2}
    # the replica stops reading, the socket's buffer is full (the transport pauses the master's
    # producer), the master appends: it is no longer caught up (while the master has nothing
    # left to send a replica counts as caught up, as in Java)
    conn.pauseProducing()
    _put(m, 3, start=10)
    for _ in range(17):
        m.clock.advance(1.0)
    assert ms.maybe_shrink_sync_state_set() == {1}
    assert ms.is_synchronizing_sync_state_set and ms.sync_state_set() == frozenset({1, 2})
    # a master that says nothing for 20 s is dropped by its replica
    conn._closed = True  # the master stops writing
    st.clear()
    for _ in range(21):
        m.clock.advance(1.0)
    assert st.disconnecting
