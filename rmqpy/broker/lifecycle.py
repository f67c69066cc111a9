"""The broker as a Twisted service tree, built by one function (Java ``BrokerController.initialize``
then ``start``): the store, the config files, the request-side services, name-server registration,
the periodic jobs, the role's services and the metrics, then (added by the tap) the listening ports,
the HA port, the gRPC endpoint and the metrics endpoint.

Children start in the order listed and stop in the reverse order, each after the one before it has
finished (:class:`SequentialMultiService`): the ports close, the broker unregisters, the config files
are written once the writes under way in threads end, and the store is flushed and closed last. The
Deferred of ``stopService`` fires when it is.
"""
from __future__ import annotations

from typing import Any, Protocol

from twisted.application import service
from twisted.internet import defer

from rmqpy.broker.periodic import PeriodicJob
from rmqpy.broker.roles import RoleServices
from rmqpy.broker.steps import SequentialMultiService, Step
from rmqpy.common.startup import ServerRoot
from rmqpy.store.role import role_of


class TreeHost(Protocol):
    """What the tree needs of the broker (BrokerController): its parts and its steps."""

    broker_config: Any
    store_config: Any
    reactor: Any
    shutting_down: bool
    pull_hold_service: Any
    broker_stats_manager: Any
    channel_sweeper: Any
    pop_service: Any
    ids_notifier: Any
    metrics_manager: Any
    role_services: RoleServices
    replicas_manager: Any  # a service.Service, or None

    def service(self) -> service.MultiService: ...
    def start_store(self) -> None: ...
    def close_store(self) -> None: ...
    def persist_loaded(self) -> None: ...
    def persist_when_saved(self) -> defer.Deferred[Any]: ...
    def stop_acl(self) -> None: ...
    def register_at_start(self) -> None: ...
    def unregister_at_stop(self) -> defer.Deferred[Any]: ...
    def register_broker_all(self) -> defer.Deferred[Any]: ...
    def register_periodically(self) -> Any: ...
    def persist_offsets(self) -> None: ...
    def persist_order_info(self) -> None: ...
    def scan_not_active_channels(self) -> None: ...


class BrokerCore(SequentialMultiService):
    """The broker's own services; ``shutting_down`` is set before any of them stops."""

    def __init__(self, broker: TreeHost) -> None:
        super().__init__()
        self.setName("broker")
        self.broker = broker

    def stopService(self) -> defer.Deferred[None]:  # noqa: N802 (Twisted's name)
        self.broker.shutting_down = True
        return super().stopService()


def broker_core(b: TreeHost) -> BrokerCore:
    """The broker's service tree in start order (the store and the config files loaded by
    ``BrokerController.initialize``)."""
    bc = b.broker_config
    core = BrokerCore(b)
    children: list[service.Service] = [
        Step("store", b.start_store, b.close_store),
        Step("config-files", b.persist_loaded, b.persist_when_saved),
        Step("pull-hold", b.pull_hold_service.start, b.pull_hold_service.stop),
        Step("stats", b.broker_stats_manager.start, b.broker_stats_manager.stop),
        Step("acl", None, b.stop_acl),
        name_server_registration(b),
        PeriodicJob("persist-offsets", b.reactor, 10.0, bc.flushConsumerOffsetInterval / 1000.0, b.persist_offsets),
        PeriodicJob("persist-order-info", b.reactor, 10.0, 10.0, b.persist_order_info),  # Java: 10 s
        PeriodicJob("scan-channels", b.reactor, 10.0, bc.channelScanIntervalMills / 1000.0,
                    b.scan_not_active_channels),
        Step("channel-sweeper", b.channel_sweeper.start, b.channel_sweeper.stop),
        b.role_services,
        Step("pop-polling", None, b.pop_service.polling.stop),
        # the rounds that tell a large group of its members (rmqpy/broker/ids_notify.py) end with it
        Step("ids-notify", None, b.ids_notifier.stop),
    ]
    if b.replicas_manager is not None:  # controller mode: the role comes from the controller
        children.insert(children.index(b.role_services) + 1, b.replicas_manager)
    if b.metrics_manager is not None:
        children.append(Step("metrics", b.metrics_manager.start, b.metrics_manager.stop))
    if b.replicas_manager is None:  # in controller mode no role runs until the controller names one
        b.role_services.choose(role_of(b.store_config))
    for child in children:
        child.setServiceParent(core)
    return core


def name_server_registration(b: TreeHost) -> SequentialMultiService:
    """Register at start and every ``registerNameServerPeriod``; unregister at a clean stop."""
    registration = SequentialMultiService()
    registration.setName("name-server-registration")
    Step("register", b.register_at_start, b.unregister_at_stop).setServiceParent(registration)
    PeriodicJob("register-broker", b.reactor, 10.0, b.broker_config.registerNameServerPeriod / 1000.0,
                b.register_periodically).setServiceParent(registration)
    return registration


class BrokerRoot(SequentialMultiService, ServerRoot):
    """The tap's top service: a port that cannot be opened ends the start with one line; its
    children stop one after the other."""


def build_broker_service(b: TreeHost, tap_name: str, listeners: list[service.Service]) -> BrokerRoot:
    """The whole broker (what the tap serves): its core, then the listening sides in order."""
    root = BrokerRoot(tap_name)
    root.controller = b  # type: ignore[attr-defined]
    b.service().setServiceParent(root)
    for listener in listeners:
        listener.setServiceParent(root)
    return root
