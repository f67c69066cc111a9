"""NOTIFY_CONSUMER_IDS_CHANGED through a broker on a task.Clock: a small group told at each change as
Java tells it, a large one told once per gathering window (doubled with each round while the group keeps
changing), a few members per tick; and the member list they then ask for, encoded once per membership."""
from __future__ import annotations

import json

import pytest
from twisted.internet import task

from rmqpy.broker.ids_notify import (
    DELAY_PER_MEMBER_S,
    IMMEDIATE_MAX_MEMBERS,
    MAX_DELAY_S,
    QUIET_S,
    ROUND_BYTES_PER_S,
    TICK_S,
    ConsumerIdsNotifier,
)
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import GetConsumerListByGroupRequestHeader
from tests.unit.broker.helpers import FakeChannel, call
from tests.unit.broker.test_processors import heartbeat


def notices(channel: FakeChannel) -> int:
    return sum(1 for r in channel.oneway if r.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)


def join(broker, n: int, group: str = "G", start: int = 0) -> list[FakeChannel]:
    channels = [FakeChannel() for _ in range(n)]
    for i, ch in enumerate(channels, start):
        call(broker, ch, heartbeat(f"c{i}", group, "T"))
    return channels


def test_a_small_group_is_told_at_each_change_as_java_tells_it(clocked_broker) -> None:
    broker, _clock = clocked_broker
    a, b = join(broker, 2)
    assert (notices(a), notices(b)) == (2, 1)  # a: its own join and b's; b: its own
    broker.channel_closed(b)
    assert (notices(a), notices(b)) == (3, 1)


def settle(clock, seconds: float) -> None:
    """Run ``seconds`` of the clock tick by tick, so that a round's paced notices all go out."""
    for _ in range(round(seconds / TICK_S)):
        clock.advance(TICK_S)


def test_a_large_group_joining_is_told_once_per_window_with_its_newest_members(clocked_broker) -> None:
    broker, clock = clocked_broker
    members = join(broker, IMMEDIATE_MAX_MEMBERS)
    told_alone = sum(notices(m) for m in members)
    assert told_alone == IMMEDIATE_MAX_MEMBERS * (IMMEDIATE_MAX_MEMBERS + 1) // 2  # Java's N x N so far
    # 1,000 more join within one window: nobody is told until the window ends, then each member once
    late = join(broker, 1000, start=IMMEDIATE_MAX_MEMBERS)
    everyone = members + late
    assert sum(notices(m) for m in everyone) == told_alone
    settle(clock, MAX_DELAY_S)
    assert all(notices(m) == 1 for m in late)
    assert sum(notices(m) for m in everyone) == told_alone + len(everyone)
    # one more joins and one leaves in the next window: the one gone is not told, the others once more
    everyone += join(broker, 1, start=len(everyone))
    gone = everyone.pop(0)
    broker.channel_closed(gone)
    before = notices(gone)
    settle(clock, MAX_DELAY_S)
    assert notices(gone) == before and all(notices(m) == 2 for m in late) and notices(everyone[-1]) == 1
    n = broker.ids_notifier
    assert (n.pending, n.untold, n.ticks) == ({}, {}, {})


class Member:
    def __init__(self, name: str) -> None:
        self.name, self.told = name, 0

    def invoke_oneway(self, request: RemotingCommand) -> None:
        assert request.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
        self.told += 1


def notifier(group: list[Member], list_bytes: int) -> tuple[ConsumerIdsNotifier, task.Clock]:
    clock = task.Clock()
    return ConsumerIdsNotifier(clock, lambda g: list(group), list_bytes=lambda g: list_bytes), clock


def test_a_round_tells_a_few_members_per_tick_as_their_member_lists_allow() -> None:
    group = [Member(f"m{i}") for i in range(1000)]
    per_tick = 10
    n, clock = notifier(group, int(ROUND_BYTES_PER_S * TICK_S) // per_tick)  # 10 lists fill a tick
    n.changed("G", len(group))
    clock.advance(len(group) * DELAY_PER_MEMBER_S)  # the window: the first tick at once
    assert [m.told for m in group[:11]] == [1] * per_tick + [0]
    clock.advance(TICK_S)
    assert sum(m.told for m in group) == 2 * per_tick
    # a change now starts a round after the next window (doubled: one round told already); the members
    # the first round has not reached by then come first, a member gone is not told, one new is told last
    n.changed("G", len(group))
    assert n.pending["G"].getTime() - clock.seconds() == pytest.approx(2 * len(group) * DELAY_PER_MEMBER_S)
    gone, new = group.pop(500), Member("new")
    group.append(new)
    while not any(m.told == 2 for m in group):
        clock.advance(TICK_S)
    assert all(m.told >= 1 for m in group[:-1]) and new.told == 0  # none told twice before all once
    while n.untold:
        clock.advance(TICK_S)
    # everyone told, the member gone never; those the first round had not reached only once (by the second)
    assert gone.told == 0 and new.told == 1 and {m.told for m in group[:-1]} == {1, 2}
    assert (n.pending, n.untold, n.ticks) == ({}, {}, {})


def test_the_window_doubles_with_each_round_until_the_group_is_quiet() -> None:
    group = [Member(f"m{i}") for i in range(500)]
    n, clock = notifier(group, 1)
    windows = []
    for _ in range(5):
        n.changed("G", len(group))
        windows.append(n.pending["G"].getTime() - clock.seconds())
        settle(clock, MAX_DELAY_S + 1)
    assert windows == pytest.approx([0.5, 1.0, 2.0, 4.0, MAX_DELAY_S])
    clock.advance(QUIET_S + 1)
    n.changed("G", len(group))
    assert n.pending["G"].getTime() - clock.seconds() == pytest.approx(0.5)
    assert all(m.told == 5 for m in group)


def test_notifyConsumerIdsChangedEnable_false_tells_nobody(clocked_broker) -> None:  # noqa: N802 (Java's key)
    broker, clock = clocked_broker
    broker.broker_config.notifyConsumerIdsChangedEnable = False
    members = join(broker, IMMEDIATE_MAX_MEMBERS + 10)
    clock.advance(MAX_DELAY_S)
    assert sum(notices(m) for m in members) == 0


def member_list(broker, channel: FakeChannel, group: str = "G") -> bytes:
    resp = call(broker, channel, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                         GetConsumerListByGroupRequestHeader(group)))
    assert resp.code == ResponseCode.SUCCESS
    return resp.body


def test_the_member_list_is_encoded_once_per_membership_and_always_current(clocked_broker) -> None:
    """Every member asks for the list after a notice: one encoding serves them all, and any change
    (a join, an UNREGISTER_CLIENT, a closed connection, an expired one, another client id on the same
    connection) makes the next answer a fresh one."""
    broker, clock = clocked_broker
    a, b, c = join(broker, 3)

    def ids(body: bytes) -> list[str]:
        return sorted(json.loads(body)["consumerIdList"])

    first = member_list(broker, a)
    assert ids(first) == ["c0", "c1", "c2"] and member_list(broker, b) is first
    call(broker, a, heartbeat("c0", "G", "T"))  # nothing changed: the same bytes
    assert member_list(broker, c) is first
    d, = join(broker, 1, start=3)
    size = broker.consumer_manager.list_bytes("G")  # counted before it is encoded: the paced rounds' measure
    assert ids(body := member_list(broker, a)) == ["c0", "c1", "c2", "c3"] and len(body) == size
    broker.channel_closed(d)
    assert ids(member_list(broker, a)) == ["c0", "c1", "c2"]
    call(broker, c, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT,
                                            ext_fields={"clientID": "c2", "consumerGroup": "G"}))
    assert ids(member_list(broker, a)) == ["c0", "c1"]
    call(broker, b, heartbeat("c1-again", "G", "T"))  # another client id on b's connection
    assert ids(member_list(broker, a)) == ["c0", "c1-again"]
    clock.advance(60)
    call(broker, a, heartbeat("c0", "G", "T"))
    broker.consumer_manager.scan_not_active_channel(30_000)  # b has been silent for 60 s
    assert ids(member_list(broker, a)) == ["c0"]
