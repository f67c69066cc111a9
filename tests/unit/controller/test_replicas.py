"""The controller's state machine and request logic against Java 5.3.3's ReplicasInfoManagerTest
and DefaultElectPolicy, scenario for scenario (names follow Java's test methods)."""
from __future__ import annotations

from twisted.internet.task import Clock

from rmqpy.controller import replicas
from rmqpy.controller.elect import DefaultElectPolicy, compare
from rmqpy.controller.heartbeat import BrokerHeartbeatManager, BrokerLiveInfo
from rmqpy.controller.state import ReplicasState, event_from_wire
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.controller import SyncStateSet
from rmqpy.protocol.codes import ResponseCode

CLUSTER, NAME = "cluster-a", "broker-a"
IP = ["127.0.0.1:9000", "127.0.0.1:9001", "127.0.0.1:9002"]
ALL_ALIVE = lambda c, n, i: True  # noqa: E731


class Harness:
    def __init__(self, elect_unclean: bool = False) -> None:
        self.state = ReplicasState()
        self.unclean = elect_unclean
        self.clock = Clock()
        self.clock.advance(1_000_000)
        self.hb = BrokerHeartbeatManager(self.clock)

    def apply(self, result: replicas.Result) -> replicas.Result:
        for e in result.events:  # through the wire form, as the log carries them
            self.state.apply(event_from_wire(e.to_wire()))
        return result

    def register(self, address: str, expect_id: int, expect_master: int | None) -> None:
        nxt = replicas.next_broker_id(self.state, CLUSTER, NAME)
        assert nxt.code == ResponseCode.SUCCESS and nxt.header.nextBrokerId == expect_id
        applied = self.apply(replicas.apply_broker_id(self.state, CLUSTER, NAME, expect_id, f"{address};123"))
        assert applied.code == ResponseCode.SUCCESS
        info = self.sync_info()
        assert any(r["brokerId"] == expect_id and r["brokerAddress"] == address for r in info["notInSyncReplicas"])
        reg = self.apply(replicas.register_broker(self.state, CLUSTER, NAME, expect_id, address, ALL_ALIVE))
        assert reg.code == ResponseCode.SUCCESS
        assert reg.header.masterBrokerId == expect_master

    def sync_info(self) -> dict:
        body = replicas.sync_state_data(self.state, [NAME], ALL_ALIVE).body
        return fastjson.loads(body)["replicasInfoTable"][NAME]

    def elect(self, broker_id: int | None, valid=ALL_ALIVE, live=None, designate=False) -> replicas.Result:
        return self.apply(replicas.elect_master(self.state, NAME, broker_id, designate,
                                                DefaultElectPolicy(valid, live), self.unclean))

    def alter(self, master: int, master_epoch: int, new: set[int], sss_epoch: int) -> replicas.Result:
        result = self.apply(replicas.alter_sync_state_set(self.state, NAME, master, master_epoch,
                                                          SyncStateSet(frozenset(new), sss_epoch), ALL_ALIVE))
        assert result.code == ResponseCode.SUCCESS, result.remark
        info = replicas.replica_info(self.state, NAME)
        sss = SyncStateSet.decode(info.body)
        assert sss.syncStateSet == frozenset(new) and sss.syncStateSetEpoch == sss_epoch + 1
        return result

    def mock_metadata(self) -> None:
        self.register(IP[0], 1, None)
        self.register(IP[1], 2, None)
        self.register(IP[2], 3, None)
        first = self.elect(1)
        assert first.code == ResponseCode.SUCCESS
        assert (first.header.masterEpoch, first.header.syncStateSetEpoch) == (1, 1)
        assert (first.header.masterBrokerId, first.header.masterAddress) == (1, IP[0])
        assert self.elect(2).code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
        assert self.elect(3).code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
        self.alter(1, 1, {1, 2, 3}, 1)

    def heartbeat(self, ip: int, broker_id: int, timeout: int, epoch: int, max_offset: int, prio: int) -> None:
        self.hb.on_heartbeat(CLUSTER, NAME, IP[ip], broker_id, timeout, None, epoch, max_offset, -1, prio)

    def policy_elect(self) -> replicas.Result:
        return replicas.elect_master(self.state, NAME, -1, False,
                                     DefaultElectPolicy(self.hb.is_active, self.hb.live_info), self.unclean)


def test_register_broker_success():
    h = Harness()
    h.mock_metadata()
    info = h.sync_info()
    assert (info["masterBrokerId"], info["masterAddress"], info["masterEpoch"], info["syncStateSetEpoch"]) == \
        (1, IP[0], 1, 2)
    assert len(info["inSyncReplicas"]) == 3 and len(info["notInSyncReplicas"]) == 0


def test_register_with_master_exist_resp():
    h = Harness()
    h.register(IP[0], 1, None)
    h.register(IP[1], 2, None)
    h.elect(1)
    h.elect(2)
    h.register(IP[2], 3, 1)
    h.elect(3)
    info = h.sync_info()
    assert (info["masterBrokerId"], info["masterEpoch"], info["syncStateSetEpoch"]) == (1, 1, 1)
    assert len(info["inSyncReplicas"]) == 1 and len(info["notInSyncReplicas"]) == 2


def test_register_with_old_master_inactive():
    h = Harness()
    h.mock_metadata()
    result = h.elect(3, valid=lambda c, n, i: i == 3)
    assert result.code == ResponseCode.SUCCESS and result.header.masterBrokerId == 3
    info = h.sync_info()
    assert (info["masterBrokerId"], info["masterAddress"], info["masterEpoch"], info["syncStateSetEpoch"]) == \
        (3, IP[2], 2, 3)
    assert len(info["inSyncReplicas"]) == 1 and len(info["notInSyncReplicas"]) == 2


def test_elect_master_old_master_still_alive():
    h = Harness()
    h.mock_metadata()
    for i in range(3):
        h.heartbeat(i, i + 1, 10_000_000_000, 1, i + 1, 0)
    assert h.policy_elect().code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST


def test_elect_master_prefer_higher_epoch():
    h = Harness()
    h.mock_metadata()
    h.heartbeat(0, 1, -10_000, 1, 3, 0)
    h.heartbeat(1, 2, 10_000_000_000, 1, 2, 0)
    h.heartbeat(2, 3, 10_000_000_000, 0, 3, 0)
    r = h.policy_elect()
    assert (r.header.masterAddress, r.header.masterBrokerId, r.header.masterEpoch) == (IP[1], 2, 2)


def test_elect_master_prefer_higher_offset_when_epoch_equals():
    h = Harness()
    h.mock_metadata()
    h.heartbeat(0, 1, -10_000, 1, 3, 0)
    h.heartbeat(1, 2, 10_000_000_000, 1, 2, 0)
    h.heartbeat(2, 3, 10_000_000_000, 1, 3, 0)
    r = h.policy_elect()
    assert (r.header.masterAddress, r.header.masterBrokerId, r.header.masterEpoch) == (IP[2], 3, 2)


def test_elect_master_prefer_higher_priority_when_epoch_and_offset_equals():
    h = Harness()
    h.mock_metadata()
    h.heartbeat(0, 1, -10_000, 1, 3, 3)
    h.heartbeat(1, 2, 10_000_000_000, 1, 3, 2)
    h.heartbeat(2, 3, 10_000_000_000, 1, 3, 1)
    r = h.policy_elect()
    assert (r.header.masterAddress, r.header.masterBrokerId, r.header.masterEpoch) == (IP[2], 3, 2)


def test_elect_master_then_admin_designates_dead_broker():
    h = Harness()
    h.mock_metadata()
    not_one = lambda c, n, i: i != 1  # noqa: E731
    r = h.elect(-1, valid=not_one)
    assert r.header.masterEpoch == 2 and r.header.masterBrokerId != 1 and r.header.masterAddress != IP[0]
    h.alter(r.header.masterBrokerId, r.header.masterEpoch, {1, 2, 3}, r.header.syncStateSetEpoch)
    # the admin asks for broker 1, which is not alive
    failed = h.elect(1, valid=not_one, designate=True)
    assert failed.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED and not failed.events


def test_controller_trigger_with_no_candidate_drops_master_and_keeps_set():
    h = Harness()
    h.mock_metadata()
    r = h.elect(-1, valid=lambda c, n, i: False)
    assert r.code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    info = h.state.sync_state[NAME]
    assert info.masterBrokerId is None and info.masterEpoch == 2 and info.syncStateSet == {1, 2, 3}
    # the first broker back is elected once it is in the set
    r = h.elect(2, valid=lambda c, n, i: i == 2)
    assert r.code == ResponseCode.SUCCESS and r.header.masterBrokerId == 2 and r.header.masterEpoch == 3


def test_unclean_master_only_with_enable_elect_unclean_master():
    for unclean, expected in ((False, ResponseCode.CONTROLLER_ELECT_MASTER_FAILED), (True, ResponseCode.SUCCESS)):
        h = Harness(elect_unclean=unclean)
        h.register(IP[0], 1, None)
        h.register(IP[1], 2, None)
        h.elect(1)
        assert h.elect(2, valid=lambda c, n, i: i == 2).code == expected


def test_alter_sync_state_set_checks_in_java_order():
    h = Harness()
    h.mock_metadata()
    s = h.state

    def alter(master, m_epoch, new, s_epoch, alive=ALL_ALIVE, name=NAME):
        return replicas.alter_sync_state_set(s, name, master, m_epoch, SyncStateSet(frozenset(new), s_epoch), alive)

    assert alter(1, 1, {1}, 2, name="nope").code == ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    assert alter(1, 1, {1, 2, 3}, 2).code == ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED  # unchanged
    assert alter(2, 1, {1, 2}, 2).code == ResponseCode.CONTROLLER_INVALID_MASTER
    assert alter(1, 0, {1, 2}, 2).code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH
    assert alter(1, 1, {1, 2}, 1).code == ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
    assert alter(1, 1, {1, 9}, 2).code == ResponseCode.CONTROLLER_INVALID_REPLICAS
    assert alter(1, 1, {1, 2}, 2, alive=lambda c, n, i: i != 2).code == ResponseCode.CONTROLLER_BROKER_NOT_ALIVE
    assert alter(1, 1, {2, 3}, 2).code == ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED  # master left out
    ok = alter(1, 1, {1, 2}, 2)
    assert ok.code == ResponseCode.SUCCESS and ok.header.newSyncStateSetEpoch == 3


def test_apply_broker_id_rules():
    h = Harness()
    s = h.state
    r = replicas.apply_broker_id(s, CLUSTER, NAME, 2, "a:1;1")
    assert r.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID  # first id of a new set must be 1
    h.apply(replicas.apply_broker_id(s, CLUSTER, NAME, 1, "a:1;1"))
    assert replicas.apply_broker_id(s, CLUSTER, NAME, 1, "a:1;1").code == ResponseCode.SUCCESS  # same code again
    assert replicas.apply_broker_id(s, CLUSTER, NAME, 1, "b:1;2").code == ResponseCode.CONTROLLER_BROKER_ID_INVALID
    assert replicas.next_broker_id(s, CLUSTER, NAME).header.nextBrokerId == 2
    assert replicas.next_broker_id(s, CLUSTER, "other").header.nextBrokerId == 1


def test_register_updates_a_changed_address():
    h = Harness()
    h.register(IP[0], 1, None)
    r = h.apply(replicas.register_broker(h.state, CLUSTER, NAME, 1, "10.0.0.9:9000", ALL_ALIVE))
    assert [e.kind for e in r.events] == ["UpdateBrokerAddress"]
    assert h.state.replica_info[NAME].address(1) == "10.0.0.9:9000"
    unknown = replicas.register_broker(h.state, CLUSTER, NAME, 7, IP[0], ALL_ALIVE)
    assert unknown.code == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED


def test_clean_broker_data():
    h = Harness()
    h.mock_metadata()
    s = h.state
    clean = replicas.clean_broker_data
    assert clean(s, CLUSTER, NAME, None, False, ALL_ALIVE).code == ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert clean(s, CLUSTER, NAME, "x", False, ALL_ALIVE).code == ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert clean(s, CLUSTER, NAME, "3", False, ALL_ALIVE).code == ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    r = h.apply(clean(s, CLUSTER, NAME, "3", False, lambda c, n, i: i != 3))
    assert r.code == ResponseCode.SUCCESS and 3 not in s.replica_info[NAME].brokers
    assert s.sync_state[NAME].syncStateSet == {1, 2}
    h.apply(clean(s, CLUSTER, NAME, None, True, ALL_ALIVE))
    assert not s.contains(NAME)
    assert clean(s, CLUSTER, NAME, None, True, ALL_ALIVE).code == ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA


def test_need_reelect():
    h = Harness()
    h.mock_metadata()
    assert replicas.need_reelect(h.state, ALL_ALIVE) == []
    assert replicas.need_reelect(h.state, lambda c, n, i: i != 1) == [NAME]
    assert replicas.need_reelect(h.state, lambda c, n, i: False) == []  # nobody to elect


def test_elect_answer_body_names_the_member_group():
    h = Harness()
    h.register(IP[0], 1, None)
    body = fastjson.loads(h.elect(1).body)
    assert body == {"brokerMemberGroup": {"brokerAddrs": {1: IP[0]}, "brokerName": NAME, "cluster": CLUSTER},
                    "syncStateSet": [1]}


def _live(i, epoch, offset, prio):
    return BrokerLiveInfo(NAME, IP[0], i, 0, 0, None, epoch, offset, prio)


def test_comparator_casts_the_offset_difference_to_int_as_java():
    a, b = _live(1, 1, 0, 0), _live(2, 1, 1 << 32, 0)
    assert compare(a, b) == 0  # (int) (2^32 - 0) == 0 in Java
    assert compare(_live(1, 1, 5, 0), _live(2, 1, 3, 0)) < 0
    assert compare(_live(1, 2, 0, 0), _live(2, 1, 9, 0)) < 0
    assert compare(_live(1, 1, 3, 1), _live(2, 1, 3, 2)) < 0


def test_policy_prefers_sync_set_then_old_master_then_designated():
    p = DefaultElectPolicy(lambda c, n, i: i in {2, 3}, None)
    assert p.elect(CLUSTER, NAME, {1, 2, 3}, None, 3, None) == 3   # old master valid
    assert p.elect(CLUSTER, NAME, {1, 2, 3}, None, 3, 2) == 2      # designated, valid
    assert p.elect(CLUSTER, NAME, {1, 2, 3}, None, 3, 1) is None   # designated, dead
    assert p.elect(CLUSTER, NAME, {1}, {1, 2, 3}, 1, None) == 2    # unclean: lowest id without live info
    assert p.elect(CLUSTER, NAME, {1}, None, 1, None) is None


def test_state_dump_round_trip():
    h = Harness()
    h.mock_metadata()
    again = ReplicasState.load(fastjson.loads(fastjson.dumps(h.state.dump())))
    assert again.dump() == h.state.dump()
