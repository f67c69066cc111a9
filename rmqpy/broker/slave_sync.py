"""SlaveSynchronize: a slave copies its master's metadata (Java ``broker/slave/SlaveSynchronize``).

Every ``syncAll`` (3 s after start, then every 10 s, as Java schedules it) a slave asks the
master it learnt from its name server registration for GET_ALL_TOPIC_CONFIG,
GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET and GET_ALL_SUBSCRIPTIONGROUP_CONFIG, and keeps
what it got as Java does: the topics and the subscription groups replace its own when their data
version differs, consumer offsets are merged in, delay offsets replace its own; each is
persisted. A master's answer that is not a success or does not parse is logged (rate-limited)
and skipped; the next round tries again. Apart from that, every 3 s as Java 5 asks it
(``syncTimerCheckPoint``), GET_TIMER_CHECK_POINT: the master's timer checkpoint goes to the timer
service (rmqpy/broker/timer.py), which decides on promotion what was delivered already.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime

from rmqpy.broker.offsets import ConsumerOffsetManager, DelayOffsetManager
from rmqpy.broker.subscription import SubscriptionGroupManager
from rmqpy.broker.timer_checkpoint import TimerCheckpoint
from rmqpy.broker.topic import TopicConfigManager
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.topic import DataVersion
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.remoting.ratelimit import RateLimitedLogger

#: (master address, request) -> Deferred of the answer
Invoke = Callable[[str, RemotingCommand], "defer.Deferred[RemotingCommand]"]


class TimerCheckpointSink(Protocol):
    def adopt(self, master: TimerCheckpoint) -> None: ...


class SlaveSynchronize:
    log = RateLimitedLogger()

    def __init__(self, invoke: Invoke, own_addr: str, topics: TopicConfigManager, offsets: ConsumerOffsetManager,
                 delay_offsets: DelayOffsetManager, groups: SubscriptionGroupManager, clock: IReactorTime | None = None,
                 timer: TimerCheckpointSink | None = None) -> None:
        self.log = self.log.on(clock)
        self.invoke = invoke
        self.own_addr = own_addr
        self.topics = topics
        self.offsets = offsets
        self.delay_offsets = delay_offsets
        self.groups = groups
        self.timer = timer
        self.master_addr: str | None = None
        self.synced_rounds = 0

    def sync_all(self) -> defer.Deferred[Any]:
        master = self.master_addr
        if not master or master == self.own_addr:
            return defer.succeed(None)
        steps = [(RequestCode.GET_ALL_TOPIC_CONFIG, self._topics),
                 (RequestCode.GET_ALL_CONSUMER_OFFSET, self._offsets),
                 (RequestCode.GET_ALL_DELAY_OFFSET, self._delay_offsets),
                 (RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self._groups)]
        ds = [self.invoke(master, RemotingCommand.request(code)).addCallback(self._apply, code, apply, master)
              .addErrback(self._failed, code, master) for code, apply in steps]
        return defer.gatherResults(ds).addCallback(self._round_done)

    def sync_timer_checkpoint(self) -> defer.Deferred[Any]:
        master = self.master_addr
        if not master or master == self.own_addr or self.timer is None:
            return defer.succeed(None)
        code = RequestCode.GET_TIMER_CHECK_POINT
        return (self.invoke(master, RemotingCommand.request(code)).addCallback(self._timer_checkpoint, master)
                .addErrback(self._failed, code, master))

    def _timer_checkpoint(self, response: RemotingCommand, master: str) -> None:
        if response.code != ResponseCode.SUCCESS:
            self.log.warn("slave sync: GET_TIMER_CHECK_POINT from master {m} answered {c} {r}", m=master,
                          c=response.code, r=response.remark)
            return
        assert self.timer is not None
        self.timer.adopt(TimerCheckpoint.decode(response.body))

    def _round_done(self, _: Any) -> None:
        self.synced_rounds += 1

    def _apply(self, response: RemotingCommand, code: int, apply: Callable[[Any], None], master: str) -> None:
        if response.code != ResponseCode.SUCCESS or not response.body:
            self.log.warn("slave sync: {code} from master {m} answered {c} {r}", code=RequestCode(code).name,
                          m=master, c=response.code, r=response.remark)
            return
        obj = fastjson.loads(response.body)
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        apply(obj)

    def _failed(self, failure: Any, code: int, master: str) -> None:
        self.log.warn("slave sync: {code} from master {m} failed: {e}", code=RequestCode(code).name, m=master,
                      e=failure.getErrorMessage())

    def _topics(self, obj: dict[str, Any]) -> None:
        version = DataVersion.from_json(obj.get("dataVersion"))
        if self.topics.data_version.same_as(version):
            return
        previous = dict(self.topics.table)
        self.topics.table.clear()
        try:
            self.topics.decode(obj)
        except Exception:
            self.topics.table.update(previous)
            raise
        self.topics.save()

    def _offsets(self, obj: dict[str, Any]) -> None:
        self.offsets.decode(obj)  # merged in (Java putAll)
        self.offsets.save()

    def _delay_offsets(self, obj: dict[str, Any]) -> None:
        self.delay_offsets.decode(obj)
        self.delay_offsets.persist()

    def _groups(self, obj: dict[str, Any]) -> None:
        version = DataVersion.from_json(obj.get("dataVersion"))
        if self.groups.data_version.same_as(version):
            return
        previous = dict(self.groups.table)
        self.groups.table.clear()
        try:
            self.groups.decode(obj)
        except Exception:
            self.groups.table.update(previous)
            raise
        self.groups.save()
