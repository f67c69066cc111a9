"""GET_BROKER_HA_STATUS's HARuntimeInfo from both HA modes, on one task.Clock: a classic master
with its slave and the slave's side, an AutoSwitch master whose in-sync set decides who is in
sync and the AutoSwitch replica's side; and the byte rate both count with (Java ``FlowMonitor``)."""
from __future__ import annotations

from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from rmqpy.broker.replicas.autoswitch import AutoSwitchReplication
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.ha import HARuntimeInfo
from rmqpy.store.ha.flow import ByteRate
from rmqpy.store.ha.replication import Replication
from rmqpy.store.ha.wire import HEADER

from ..conftest import msg
from ..test_ha import Link, _pair
from .autoswitch.test_protocol import Wire, _put, _service
from .autoswitch.test_protocol import _pair as _autoswitch_pair

# fastjson's names: the getters of Java's HARuntimeInfo and its two nested classes (isActivated has none)
INFO_KEYS = {"master", "masterCommitLogMaxOffset", "inSyncSlaveNums", "haConnectionInfo", "haClientRuntimeInfo"}
CONN_KEYS = {"addr", "slaveAckOffset", "diff", "inSync", "transferredByteInSecond", "transferFromWhere"}
CLIENT_KEYS = {"masterAddr", "transferredByteInSecond", "maxOffset", "lastReadTimestamp", "lastWriteTimestamp",
               "masterFlushOffset"}


def _wire(info: HARuntimeInfo) -> dict:
    data = info.encode()
    assert HARuntimeInfo.decode(data) == info
    return fastjson.loads(data)


def test_byte_rate_is_the_last_whole_second_rolled_lazily():
    clock = Clock()
    clock.advance(100.25)
    rate = ByteRate(clock)
    rate.add(10)
    clock.advance(0.5)
    rate.add(5)
    assert rate.per_second() == 0  # the first second has not ended
    clock.advance(0.5)
    assert rate.per_second() == 15
    rate.add(7)
    clock.advance(0.99)
    assert rate.per_second() == 15
    clock.advance(0.01)
    assert rate.per_second() == 7
    clock.advance(1.0)  # a second without bytes
    assert rate.per_second() == 0
    rate.add(3)
    clock.advance(5.5)  # long after: nothing in the last whole second
    assert rate.per_second() == 0


def test_classic_master_with_its_slave_and_the_slave_side(tmp_path):
    m, s = _pair(tmp_path, haMasterAddress="127.0.0.1:10912")
    for i in range(20):
        m.put(msg(body=bytes([i]) * 100))
    end = m.store.get_max_phy_offset()
    mr = Replication(m.store, m.store.config, m.clock)
    sr = Replication(s.store, s.store.config, s.clock)
    link = Link(mr, sr)
    t0 = m.clock.seconds()
    link.pump(m.clock)
    assert s.store.get_max_phy_offset() == end
    m.clock.advance(t0 + 1.0 - m.clock.seconds())  # the second of the transfer has just ended
    sent = HEADER.size + end  # one block: the slave started empty, at the master's only file

    info = mr.ha_runtime_info()
    obj = _wire(info)
    assert set(obj) == INFO_KEYS and set(obj["haConnectionInfo"][0]) == CONN_KEYS
    assert set(obj["haClientRuntimeInfo"]) == CLIENT_KEYS - {"masterAddr"}  # null: left out
    assert (obj["master"], obj["masterCommitLogMaxOffset"], obj["inSyncSlaveNums"]) == (True, end, 1)
    assert obj["haConnectionInfo"] == [{"addr": "127.0.0.1:2", "slaveAckOffset": end, "diff": 0, "inSync": True,
                                        "transferredByteInSecond": sent, "transferFromWhere": end}]

    slave = sr.ha_runtime_info()
    obj = _wire(slave)
    assert (obj["master"], obj["haConnectionInfo"], obj["inSyncSlaveNums"]) == (False, [], 0)
    assert obj["haClientRuntimeInfo"] == {
        "masterAddr": "127.0.0.1:10912", "maxOffset": end, "transferredByteInSecond": sent,
        "lastReadTimestamp": int(link.proto.last_read * 1000), "lastWriteTimestamp": int(link.proto.last_write * 1000),
        "masterFlushOffset": 0}
    assert int(t0 * 1000) <= obj["haClientRuntimeInfo"]["lastWriteTimestamp"] <= int(m.clock.seconds() * 1000)

    # the master runs ahead of a slave that no longer reads: diff grows, in sync until haMaxGapNotInSync
    m.store.config.haMaxGapNotInSync = 1000
    m.put(msg(body=b"x" * 500))
    [c] = mr.ha_runtime_info().haConnectionInfo
    assert (c.slaveAckOffset, c.diff, c.inSync) == (end, m.store.get_max_phy_offset() - end, True)
    m.put(msg(body=b"x" * 500))
    info = mr.ha_runtime_info()
    [c] = info.haConnectionInfo
    assert (c.diff, c.inSync, info.inSyncSlaveNums) == (m.store.get_max_phy_offset() - end, False, 0)
    m.clock.advance(2.0)
    assert c.transferredByteInSecond >= 0 and mr.ha_runtime_info().haConnectionInfo[0].transferredByteInSecond == 0

    # a connection that said nothing yet is listed, as Java lists it: acknowledged -1, no transfer
    m.store.config.haMaxGapNotInSync = 1 << 28
    quiet = mr.service.buildProtocol(IPv4Address("TCP", "10.0.0.9", 4))
    quiet.makeConnection(StringTransport(peerAddress=IPv4Address("TCP", "10.0.0.9", 4)))
    top = m.store.get_max_phy_offset()
    [_, q] = mr.ha_runtime_info().haConnectionInfo
    assert (q.addr, q.slaveAckOffset, q.diff, q.transferFromWhere) == ("10.0.0.9:4", -1, top + 1, -1)
    assert q.inSync  # Java's rule: its end - (-1) is under haMaxGapNotInSync
    quiet.connectionLost(None)
    link.conn.transport.loseConnection()
    link.conn.connectionLost(None)
    link.proto.connectionLost(None)
    assert mr.ha_runtime_info().haConnectionInfo == []
    assert sr.ha_runtime_info().haClientRuntimeInfo.lastReadTimestamp == 0  # no connection
    m.close()
    s.close()


def test_classic_master_without_slaves(tmp_path):
    m, s = _pair(tmp_path)
    m.put(msg())
    mr = Replication(m.store, m.store.config, m.clock)
    assert _wire(mr.ha_runtime_info()) == {
        "master": True, "masterCommitLogMaxOffset": m.store.get_max_phy_offset(), "inSyncSlaveNums": 0,
        "haConnectionInfo": [], "haClientRuntimeInfo": {"lastReadTimestamp": 0, "lastWriteTimestamp": 0,
                                                        "masterFlushOffset": 0, "maxOffset": 0,
                                                        "transferredByteInSecond": 0}}
    sr = Replication(s.store, s.store.config, s.clock)  # a slave with no master address yet
    assert _wire(sr.ha_runtime_info())["haClientRuntimeInfo"] == {
        "lastReadTimestamp": 0, "lastWriteTimestamp": 0, "masterFlushOffset": 0, "maxOffset": 0,
        "transferredByteInSecond": 0}
    m.close()
    s.close()


def test_autoswitch_master_in_sync_by_its_sync_state_set_and_the_replica_side(tmp_path):
    m, r = _autoswitch_pair(tmp_path)
    ms = _service(m)
    # no role yet: a replica with no master (Java's controller-mode broker starts as SLAVE)
    assert _wire(AutoSwitchReplication(ms, m.store).ha_runtime_info())["haClientRuntimeInfo"] == {
        "lastReadTimestamp": 0, "lastWriteTimestamp": 0, "masterFlushOffset": 0, "maxOffset": 0,
        "transferredByteInSecond": 0}
    ms.set_local_broker_id(1)
    ms.change_to_master(1)
    _put(m, 30)
    rs = _service(r)
    wire = Wire(ms, rs, m.clock)
    ms.set_sync_state_set({1})
    t0 = m.clock.seconds()
    rs.change_to_slave("127.0.0.1:10911", 1, 2, master_ha_address="127.0.0.1:10912")
    wire.pump()
    end = m.store.get_max_phy_offset()
    assert r.store.get_max_phy_offset() == end
    master, replica = AutoSwitchReplication(ms, m.store), AutoSwitchReplication(rs, r.store)

    # caught up, but the controller has not answered: not in the local set yet
    info = master.ha_runtime_info()
    [c] = info.haConnectionInfo
    assert (info.master, info.masterCommitLogMaxOffset, info.inSyncSlaveNums) == (True, end, 0)
    assert (c.addr, c.slaveAckOffset, c.diff, c.inSync, c.transferFromWhere) == ("127.0.0.1:2", end, 0, False, end)
    ms.set_sync_state_set({1, 2})
    obj = _wire(master.ha_runtime_info())
    assert obj["inSyncSlaveNums"] == 1 and obj["haConnectionInfo"][0]["inSync"] is True

    # bytes: the handshake answer and the frames (36-byte headers), counted in the second they went
    conn, mt, proto, st = wire.links[0]
    m.clock.advance(t0 + 1.0 - m.clock.seconds())
    [c] = master.ha_runtime_info().haConnectionInfo
    assert c.transferredByteInSecond > end
    assert replica.ha_runtime_info().haClientRuntimeInfo.transferredByteInSecond == c.transferredByteInSecond

    obj = _wire(replica.ha_runtime_info())
    assert (obj["master"], obj["haConnectionInfo"]) == (False, [])
    assert obj["haClientRuntimeInfo"] == {
        "masterAddr": "127.0.0.1:10912", "maxOffset": end, "transferredByteInSecond": c.transferredByteInSecond,
        "lastReadTimestamp": int(proto.last_read * 1000), "lastWriteTimestamp": int(proto.last_write * 1000),
        "masterFlushOffset": 0}
    m.close()
    r.close()
