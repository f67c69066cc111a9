"""ProducerManager and ConsumerManager: who is connected, in which group, subscribed to what.

Channels are the server-side RemotingProtocol connections. A client refreshes its entry
with every HEART_BEAT; entries silent for ``channelExpiredTimeoutMills`` (120 s) are
dropped by :meth:`scan_not_active_channel` and the connection closed, as Java does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from twisted.internet.interfaces import IReactorTime

from rmqpy.protocol.bodies.heartbeat import SubscriptionData, consumer_list_body
from rmqpy.remoting.ratelimit import RateLimitedLogger


@dataclass(eq=False)
class ClientChannelInfo:
    channel: Any
    client_id: str
    language: int
    version: int
    last_update: int = 0  # ms

    @property
    def address(self) -> str:
        return self.channel.remote_address


def _close(channel: Any) -> None:
    channel.close()


class ProducerManager:
    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped

    def __init__(self, now_ms: Callable[[], int], clock: IReactorTime | None = None) -> None:
        self.log = self.log.on(clock)
        self.now_ms = now_ms
        self.groups: dict[str, dict[Any, ClientChannelInfo]] = {}
        self.client_channels: dict[str, Any] = {}

    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        table = self.groups.setdefault(group, {})
        old = table.get(info.channel)
        if old is None:
            table[info.channel] = info
            self.client_channels[info.client_id] = info.channel
            self.log.info("new producer connected, group: {g} channel: {c}", g=group, c=info.address)
            old = info
        old.last_update = self.now_ms()

    def unregister_producer(self, group: str, info: ClientChannelInfo) -> None:
        table = self.groups.get(group)
        if table and table.pop(info.channel, None) is not None:
            self.client_channels.pop(info.client_id, None)
            if not table:
                del self.groups[group]

    def channel_closed(self, channel: Any) -> None:
        for group in list(self.groups):
            info = self.groups[group].pop(channel, None)
            if info is not None:
                self.client_channels.pop(info.client_id, None)
            if not self.groups[group]:
                del self.groups[group]

    def find_channel(self, client_id: str) -> Any | None:
        return self.client_channels.get(client_id)

    def get_available_channel(self, group: str) -> Any | None:
        for info in (self.groups.get(group) or {}).values():
            if info.channel.connected_:
                return info.channel
        return None

    def scan_not_active_channel(self, timeout_ms: int) -> list[Any]:
        now = self.now_ms()
        dropped = []
        for group in list(self.groups):
            for channel, info in list(self.groups[group].items()):
                if now - info.last_update > timeout_ms:
                    del self.groups[group][channel]
                    self.client_channels.pop(info.client_id, None)
                    self.log.warn("SCAN: remove expired channel[{c}] from ProducerManager groupChannelTable, "
                                  "producer group name: {g}", c=info.address, g=group)
                    dropped.append(channel)
            if not self.groups[group]:
                del self.groups[group]
        return dropped


@dataclass
class ConsumerGroupInfo:
    """One consumer group. ``channels`` is changed only through :meth:`update_channel` and
    :meth:`remove_channel`: they drop the encoded member list that :meth:`consumer_list_body` keeps."""

    group: str
    consume_type: str
    message_model: str
    consume_from_where: str
    channels: dict[Any, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    heartbeat_fingerprint: int | None = None
    last_update: int = 0
    _list_body: bytes | None = field(default=None, repr=False, compare=False)

    def client_ids(self) -> list[str]:
        return [info.client_id for info in self.channels.values()]

    def consumer_list_body(self) -> bytes:
        """The GET_CONSUMER_LIST_BY_GROUP body, encoded once per member list: a group of 5,000 members
        that all ask after a change would otherwise encode 5,000 ids 5,000 times (issue 31, case 3)."""
        if self._list_body is None:
            self._list_body = consumer_list_body(self.client_ids())
        return self._list_body

    def list_bytes(self) -> int:
        """The size of :meth:`consumer_list_body`, counted without encoding it when it is not at hand
        (ids of ASCII characters, each quoted, a comma between)."""
        if self._list_body is not None:
            return len(self._list_body)
        return 20 + sum(len(info.client_id) + 3 for info in self.channels.values())

    def remove_channel(self, channel: Any) -> ClientChannelInfo | None:
        info = self.channels.pop(channel, None)
        if info is not None:
            self._list_body = None
        return info

    def find_subscription(self, topic: str) -> SubscriptionData | None:
        return self.subscriptions.get(topic)

    def update_channel(self, info: ClientChannelInfo, consume_type: str, message_model: str,
                       consume_from_where: str, now: int) -> bool:
        self.consume_type, self.message_model, self.consume_from_where = consume_type, message_model, consume_from_where
        updated = False
        old = self.channels.get(info.channel)
        if old is None:
            self.channels[info.channel] = info
            self._list_body = None
            old = info
            updated = True
        elif old.client_id != info.client_id:
            self.channels[info.channel] = info
            self._list_body = None
            old = info
        old.last_update = now
        self.last_update = now
        return updated

    def update_subscription(self, subs: Iterable[SubscriptionData]) -> bool:
        """True when a topic was added or removed (Java's ``updateSubscription``)."""
        updated = False
        subs = list(subs)
        for sub in subs:
            old = self.subscriptions.get(sub.topic)
            if old is None:
                self.subscriptions[sub.topic] = sub
                updated = True
            elif sub.subVersion > old.subVersion:
                self.subscriptions[sub.topic] = sub
        wanted = {s.topic for s in subs}
        for topic in list(self.subscriptions):
            if topic not in wanted:
                del self.subscriptions[topic]
                updated = True
        return updated


class ConsumerManager:
    """Consumer groups; calls ``ids_changed(group, size)`` when membership or subscriptions change
    (rmqpy/broker/ids_notify.py tells the members, reading them with :meth:`channels_of`)."""

    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped

    def __init__(self, now_ms: Callable[[], int],
                 ids_changed: Callable[[str, int], None] | None = None,
                 on_register: Callable[[str, list[SubscriptionData]], None] | None = None,
                 on_unregister: Callable[[str], None] | None = None, clock: IReactorTime | None = None) -> None:
        self.log = self.log.on(clock)
        self.now_ms = now_ms
        self.ids_changed = ids_changed
        self.on_register = on_register
        self.on_unregister = on_unregister
        self.groups: dict[str, ConsumerGroupInfo] = {}
        # group -> when its members or subscriptions last changed (ms): the members are told then
        self.changed_at: dict[str, int] = {}
        # group -> how many times it changed: tells a member list read before a change from one read after
        self.generation: dict[str, int] = {}
        # channel -> (group, client id) that said UNREGISTER_CLIENT on it and have not heartbeated since
        self.departed: dict[Any, set[tuple[str, str]]] = {}

    def has_left(self, channel: Any, group: str, client_id: str) -> bool:
        """True when ``client_id`` unregistered from ``group`` on ``channel`` and has not come back.

        A Java client's rebalance thread may still run for a moment after its UNREGISTER_CLIENT
        (notified of another member leaving, it locks a queue for an allocation that counts
        itself): what it asks for then is for a member that no longer exists."""
        return (group, client_id) in self.departed.get(channel, ())

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.groups.get(group)
        return info.find_subscription(topic) if info else None

    def find_channel(self, group: str, client_id: str) -> Any | None:
        info = self.groups.get(group)
        if info:
            for ch in info.channels.values():
                if ch.client_id == client_id:
                    return ch.channel
        return None

    def _notify(self, group: str, enabled: bool) -> None:
        self.changed_at[group] = self.now_ms()
        self.generation[group] = self.generation.get(group, 0) + 1
        info = self.groups.get(group)
        if enabled and self.ids_changed is not None:
            self.ids_changed(group, len(info.channels) if info else 0)

    def list_bytes(self, group: str) -> int:
        """About the size of ``group``'s GET_CONSUMER_LIST_BY_GROUP body (0 for no group)."""
        info = self.groups.get(group)
        return info.list_bytes() if info else 0

    def channels_of(self, group: str) -> list[Any]:
        info = self.groups.get(group)
        return [c.channel for c in info.channels.values()] if info else []

    def register_consumer(self, group: str, info: ClientChannelInfo, consume_type: str, message_model: str,
                          consume_from_where: str, subs: list[SubscriptionData], notify: bool = True,
                          update_subscription: bool = True) -> bool:
        now = self.now_ms()
        left = self.departed.get(info.channel)
        if left:
            left.discard((group, info.client_id))
        group_info = self.groups.get(group)
        if group_info is None:
            group_info = self.groups[group] = ConsumerGroupInfo(group, consume_type, message_model,
                                                                consume_from_where)
        r1 = group_info.update_channel(info, consume_type, message_model, consume_from_where, now)
        r2 = group_info.update_subscription(subs) if update_subscription else False
        if r1 or r2:
            self._notify(group, notify)
        if self.on_register is not None and update_subscription:
            self.on_register(group, subs)
        return r1 or r2

    def unregister_consumer(self, group: str, info: ClientChannelInfo, notify: bool = True) -> None:
        self.departed.setdefault(info.channel, set()).add((group, info.client_id))
        group_info = self.groups.get(group)
        if group_info is None:
            return
        if group_info.remove_channel(info.channel) is not None:
            self.log.info("unregister consumer ok, no any connection, and remove consumer group, {g}"
                          if not group_info.channels else "unregister consumer {c} from group {g}",
                          g=group, c=info.address)
        if not group_info.channels:
            del self.groups[group]
            if self.on_unregister is not None:
                self.on_unregister(group)
        self._notify(group, notify)

    def channel_closed(self, channel: Any, notify_enabled: Callable[[str], bool] = lambda g: True) -> None:
        self.departed.pop(channel, None)
        for group in list(self.groups):
            group_info = self.groups[group]
            if group_info.remove_channel(channel) is None:
                continue
            if not group_info.channels:
                del self.groups[group]
                if self.on_unregister is not None:
                    self.on_unregister(group)
            self._notify(group, notify_enabled(group))

    def scan_not_active_channel(self, timeout_ms: int) -> list[Any]:
        now = self.now_ms()
        dropped = []
        for group in list(self.groups):
            group_info = self.groups[group]
            for channel, info in list(group_info.channels.items()):
                if now - info.last_update > timeout_ms:
                    self.log.warn("SCAN: remove expired channel from ConsumerManager consumerTable. "
                                  "channel={c}, consumerGroup={g}", c=info.address, g=group)
                    group_info.remove_channel(channel)
                    dropped.append(channel)
            if not group_info.channels:
                self.log.warn("SCAN: remove expired channel from ConsumerManager consumerTable, all clear, "
                              "consumerGroup={g}", g=group)
                del self.groups[group]
                if self.on_unregister is not None:
                    self.on_unregister(group)
        return dropped

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        return {g for g, info in self.groups.items() if topic in info.subscriptions}
