"""SlaveSynchronize between two brokers: the master's answers go through its real dispatcher."""
from __future__ import annotations

from twisted.internet import defer

from rmqpy.broker.subscription import SubscriptionGroupConfig
from rmqpy.protocol.bodies.topic import TopicConfig
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand

from .helpers import FakeChannel, call, make_broker


def _pair(tmp_path):
    master, clock = make_broker(tmp_path / "m")
    slave, _ = make_broker(tmp_path / "s", brokerRole="SLAVE", brokerId=1, listenPort=10921)
    asked: list[int] = []

    def invoke(addr, request):
        asked.append(request.code)
        assert addr == master.broker_addr
        return defer.succeed(call(master, FakeChannel(), request))
    slave.slave_synchronize.invoke = invoke
    return master, slave, asked


def test_slave_copies_topics_offsets_delay_offsets_and_groups(tmp_path):
    master, slave, asked = _pair(tmp_path)
    tm = master.topic_config_manager
    tm.table["SyncedTopic"] = TopicConfig("SyncedTopic", readQueueNums=3, writeQueueNums=3)
    tm.data_version.next_version()
    master.subscription_group_manager.update(SubscriptionGroupConfig("SyncedGroup"))
    master.consumer_offset_manager.commit_offset("h", "SyncedGroup", "SyncedTopic", 2, 42)
    master.delay_offset_manager.table[3] = 7
    # no master known yet (no registration answer): nothing asked
    slave.slave_synchronize.sync_all()
    assert asked == []
    slave.slave_synchronize.master_addr = master.broker_addr
    slave.slave_synchronize.sync_all()
    assert sorted(asked) == sorted([RequestCode.GET_ALL_TOPIC_CONFIG, RequestCode.GET_ALL_CONSUMER_OFFSET,
                                    RequestCode.GET_ALL_DELAY_OFFSET, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG])
    assert slave.topic_config_manager.table["SyncedTopic"].readQueueNums == 3
    assert slave.topic_config_manager.data_version.same_as(tm.data_version)
    assert "SyncedGroup" in slave.subscription_group_manager.table
    assert slave.consumer_offset_manager.query_offset("SyncedGroup", "SyncedTopic", 2) == 42
    assert slave.delay_offset_manager.table == master.delay_offset_manager.table and master.delay_offset_manager.table[3] == 7
    # persisted in Java's files
    text = (tmp_path / "s" / "store" / "config" / "topics.json").read_text()
    assert "SyncedTopic" in text
    assert slave.slave_synchronize.synced_rounds == 1


def test_a_bad_master_answer_changes_nothing(tmp_path):
    master, slave, _ = _pair(tmp_path)
    slave.slave_synchronize.master_addr = master.broker_addr
    before = dict(slave.topic_config_manager.table)

    def invoke(addr, request):
        r = RemotingCommand(code=ResponseCode.SUCCESS, body=b"[1,2" if request.code % 2 else b"{\"x\":")
        return defer.succeed(r)
    slave.slave_synchronize.invoke = invoke
    slave.slave_synchronize.sync_all()
    assert slave.topic_config_manager.table == before
    assert slave.slave_synchronize.synced_rounds == 1


def test_the_slave_syncs_every_ten_seconds(tmp_path):
    master, slave, asked = _pair(tmp_path)
    slave.slave_synchronize.master_addr = master.broker_addr
    clock = slave.reactor
    timer = RequestCode.GET_TIMER_CHECK_POINT
    clock.advance(3)
    assert len([c for c in asked if c != timer]) == 4 and asked.count(timer) == 1
    clock.pump([1.0] * 10)
    # syncAll every 10 s, the timer checkpoint every 3 s (Java 5's syncTimerCheckPoint)
    assert len([c for c in asked if c != timer]) == 8 and asked.count(timer) == 4
    master_now = int(master.reactor.seconds() * 1000)
    assert slave.timer_message_service.read_time_ms == master_now // 1000 * 1000  # nothing parked there
