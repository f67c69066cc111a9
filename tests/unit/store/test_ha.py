"""Classic HA between two real stores, the bytes carried by in-memory transports."""
from __future__ import annotations

from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from rmqpy.store.ha.client import HAClient, HAClientProtocol
from rmqpy.store.ha.replication import Replication
from rmqpy.store.ha.wire import HEADER, REPORT
from rmqpy.store.message_store import PutMessageStatus

from .conftest import StoreHarness, msg


def _pair(tmp_path, role="ASYNC_MASTER", **cfg):
    m = StoreHarness(tmp_path / "m", brokerRole=role, **cfg)
    s = StoreHarness(tmp_path / "s", brokerRole="SLAVE", **cfg)
    s.clock = m.clock
    m.open()
    s.open()
    return m, s


class Link:
    """A master's HAConnection and a slave's HAClientProtocol joined by two StringTransports."""

    def __init__(self, master_repl: Replication, slave_repl: Replication, slave_end: int | None = None) -> None:
        self.conn = master_repl.service.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1))
        assert slave_repl.client is not None
        self.client: HAClient = slave_repl.client
        self.proto = HAClientProtocol(self.client)
        self.mt = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 2))
        self.st = StringTransport()
        self.conn.makeConnection(self.mt)
        self.proto.makeConnection(self.st)
        self.client.connection = self.proto

    def pump(self, clock, rounds=50) -> int:
        moved = 0
        for _ in range(rounds):
            up, down = self.st.value(), self.mt.value()
            self.st.clear()
            self.mt.clear()
            if up:
                self.conn.dataReceived(up)
            if down:
                self.proto.dataReceived(down)
            moved += len(up) + len(down)
            clock.advance(0)
            if not up and not down:
                clock.advance(0.1)  # the connection's poll for new data
                if not self.mt.value() and not self.st.value():
                    break
        return moved


def _files(root):
    return {p.name: p.read_bytes() for p in sorted((root / "commitlog").iterdir())}


def test_slave_commit_log_and_consume_queues_match_the_master(tmp_path):
    m, s = _pair(tmp_path)
    mr = Replication(m.store, m.store.config, m.clock)
    sr = Replication(s.store, s.store.config, s.clock)
    link = Link(mr, sr)
    for i in range(900):  # several 64 KiB files: the blocks roll over with the master's files
        m.put(msg(qid=i % 3, body=bytes([i % 251]) * (50 + i % 200), tags=f"t{i % 5}", keys=f"k{i}"))
        if i % 97 == 0:
            link.pump(m.clock)
    link.pump(m.clock)
    end = m.store.get_max_phy_offset()
    assert len(m.store.commit_log.queue.files) > 3
    assert s.store.get_max_phy_offset() == end
    assert _files(m.root) == _files(s.root)
    for q in range(3):
        assert s.store.get_max_offset_in_queue("T", q) == m.store.get_max_offset_in_queue("T", q) == 300
        mcq, scq = m.store.find_consume_queue("T", q), s.store.find_consume_queue("T", q)
        assert [f.read(0, f.wrote_position) for f in mcq.queue.files] == \
               [f.read(0, f.wrote_position) for f in scq.queue.files]
    assert s.store.query_message("T", "k899", 5, 0, 2**62).message_list  # indexed on the slave
    assert link.conn.slave_ack_offset == end
    # the slave refuses writes as Java's does (SERVICE_NOT_AVAILABLE)
    assert s.put(msg()).put_message_status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    m.close()
    s.close()


def test_empty_slave_starts_at_the_masters_last_file(tmp_path):
    m, s = _pair(tmp_path)
    for _ in range(800):
        m.put(msg(body=b"y" * 200))
    files = m.store.commit_log.queue.files
    assert len(files) > 2
    mr = Replication(m.store, m.store.config, m.clock)
    sr = Replication(s.store, s.store.config, s.clock)
    link = Link(mr, sr)
    link.pump(m.clock)
    assert s.store.get_min_phy_offset() == files[-1].file_from_offset
    assert s.store.get_max_phy_offset() == m.store.get_max_phy_offset()
    m.close()
    s.close()


def test_slave_closes_on_a_block_not_at_its_end(tmp_path):
    m, s = _pair(tmp_path)
    s_repl = Replication(s.store, s.store.config, s.clock)
    m.put(msg())
    data = m.store.get_commit_log_data(0)
    assert s.store.append_to_commit_log(0, data)
    proto = HAClientProtocol(s_repl.client)
    t = StringTransport()
    proto.makeConnection(t)
    assert REPORT.unpack(t.value()) == (len(data),)
    proto.dataReceived(HEADER.pack(len(data) + 5, 3) + b"abc")
    assert t.disconnecting
    assert s.store.get_max_phy_offset() == len(data)
    m.close()
    s.close()


def test_master_closes_a_slave_reporting_beyond_its_end(tmp_path):
    m, s = _pair(tmp_path)
    mr = Replication(m.store, m.store.config, m.clock)
    conn = mr.service.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1))
    t = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 2))
    conn.makeConnection(t)
    conn.dataReceived(REPORT.pack(0))
    conn.dataReceived(REPORT.pack(10**9)[:5])  # a partial report waits for its other bytes
    assert not t.disconnecting
    conn.dataReceived(REPORT.pack(10**9)[5:])
    assert t.disconnecting
    m.close()
    s.close()


def test_sync_master_acknowledges_after_the_slave_has_the_bytes(tmp_path):
    m, s = _pair(tmp_path, role="SYNC_MASTER")
    mr = Replication(m.store, m.store.config, m.clock)
    sr = Replication(s.store, s.store.config, s.clock)
    # no slave: SLAVE_NOT_AVAILABLE, the message is stored anyway
    assert m.put(msg()).put_message_status is PutMessageStatus.SLAVE_NOT_AVAILABLE
    link = Link(mr, sr)
    link.pump(m.clock)
    results = []
    for i in range(20):  # many producers waiting on one transfer
        m.store.put_message(msg(body=b"%d" % i)).addCallback(results.append)
    assert results == [] and mr.service.group_transfer.pending() == 20
    link.pump(m.clock, rounds=3)
    assert [r.put_message_status for r in results] == [PutMessageStatus.PUT_OK] * 20
    assert s.store.get_max_phy_offset() == m.store.get_max_phy_offset()
    # a slave that stops acknowledging: FLUSH_SLAVE_TIMEOUT after slaveTimeout
    late = []
    m.store.put_message(msg()).addCallback(late.append)
    m.clock.advance(2.9)
    assert late == []
    m.clock.advance(0.2)
    assert late[0].put_message_status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    # WAIT=false does not wait
    now = []
    m.store.put_message(msg(props={"WAIT": "false"})).addCallback(now.append)
    assert now[0].put_message_status is PutMessageStatus.PUT_OK
    m.close()
    s.close()


def test_housekeeping_closes_a_silent_slave(tmp_path):
    m, s = _pair(tmp_path)
    mr = Replication(m.store, m.store.config, m.clock)
    conn = mr.service.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1))
    t = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 2))
    conn.makeConnection(t)
    conn.dataReceived(REPORT.pack(0))
    m.clock.advance(19)
    for _ in range(5):
        m.clock.advance(1)
    assert t.disconnecting
    m.close()
    s.close()


def test_master_writes_nothing_while_the_transport_is_paused(tmp_path):
    """Bounded buffering: a slow slave's transport pauses the connection; a catching-up slave
    gets at most _BLOCKS_PER_TURN blocks per reactor turn."""
    from rmqpy.store.ha.connection import _BLOCKS_PER_TURN
    m, s = _pair(tmp_path, haTransferBatchSize=1024)
    for _ in range(120):  # ~59 KiB, all in the first 64 KiB file
        m.put(msg(body=b"z" * 400))
    assert len(m.store.commit_log.queue.files) == 1
    mr = Replication(m.store, m.store.config, m.clock)
    conn = mr.service.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1))
    t = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 2))
    conn.makeConnection(t)
    assert t.producer is conn and t.streaming
    conn.dataReceived(REPORT.pack(0))
    first = t.value()
    assert len(first) == _BLOCKS_PER_TURN * (HEADER.size + 1024)  # then the rest on the next turns
    t.clear()
    conn.pauseProducing()
    m.clock.advance(0)
    m.clock.advance(6)  # no block, no heartbeat while paused
    assert t.value() == b""
    conn.resumeProducing()
    assert len(t.value()) == _BLOCKS_PER_TURN * (HEADER.size + 1024)
    m.close()
    s.close()
