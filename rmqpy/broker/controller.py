"""BrokerController: wires the managers, the store, the processors and the timers.

As RocketMQ's ``BrokerController``: it loads config/topics.json, consumerOffset.json,
subscriptionGroup.json and delayOffset.json (Java's formats) and the message store (any
:class:`rmqpy.store.api.MessageStore`), builds every manager, service and processor in its
constructor, registers the processors in one table (``register_processor``) with one
dispatcher shared by the main port (listenPort) and the fast port (listenPort - 2), registers with every name server at
start and every ``registerNameServerPeriod`` (and promptly when topics are created),
unregisters on a clean shutdown, flushes consumer offsets every 5 s and at shutdown, and
drops client channels silent for 120 s (scanned every 10 s).

Time comes from the injected ``reactor`` (``IReactorTime``), so unit tests drive every
timer with ``twisted.internet.task.Clock``.
"""
from __future__ import annotations

import gc
import os
from typing import Any, Callable

from twisted.application import service
from twisted.internet import defer, threads
from twisted.internet.interfaces import IReactorCore, IReactorThreads

from rmqpy.acl.client_hook import AclClientHook
from rmqpy.acl.manager import PlainPermissionManager
from rmqpy.acl.plain import DEFAULT_PLAIN_FILE, AclPaths
from rmqpy.acl.validator import PlainAccessValidator
from rmqpy.auth.config import auth_in_use
from rmqpy.auth.metadata import AuthMetadata
from rmqpy.auth.pipeline import AuthPipeline
from rmqpy.broker.api import ReplicationSide
from rmqpy.broker.clients import ConsumerManager, ProducerManager
from rmqpy.broker.config import BrokerSettings
from rmqpy.broker.configfile import ConfigManager
from rmqpy.broker.fast_failure import BrokerFastFailure
from rmqpy.broker.filter.message_filter import ConsumerFilterManager
from rmqpy.broker.handover import QueueHandover
from rmqpy.broker.ids_notify import ConsumerIdsNotifier
from rmqpy.broker.lifecycle import broker_core
from rmqpy.broker.longpolling import PullRequestHoldService
from rmqpy.broker.metrics import BrokerMetricsManager
from rmqpy.broker.offsets import ConsumerOffsetManager, DelayOffsetManager
from rmqpy.broker.pop.revive import PopReviveService
from rmqpy.broker.pop.service import PopService
from rmqpy.broker.processor.acl_admin import AclAdminProcessor
from rmqpy.broker.processor.admin import AdminBrokerProcessor
from rmqpy.broker.processor.assignment import MessageRequestModeManager, QueryAssignmentProcessor
from rmqpy.broker.processor.auth_admin import AuthAdminProcessor
from rmqpy.broker.processor.client_manage import ClientManageProcessor
from rmqpy.broker.processor.consumer_manage import ConsumerManageProcessor, StoreOffsetProcessor
from rmqpy.broker.processor.end_transaction import EndTransactionProcessor
from rmqpy.broker.processor.lock import LockBatchProcessor
from rmqpy.broker.processor.pop import (
    AckMessageProcessor,
    ChangeInvisibleTimeProcessor,
    NotificationProcessor,
    PeekMessageProcessor,
    PollingInfoProcessor,
    PopMessageProcessor,
)
from rmqpy.broker.processor.pull import PullMessageProcessor
from rmqpy.broker.processor.query import QueryMessageProcessor
from rmqpy.broker.processor.recall import RecallMessageProcessor
from rmqpy.broker.processor.replicas import ReplicasProcessor
from rmqpy.broker.processor.reply import ReplyMessageProcessor
from rmqpy.broker.processor.send import SendMessageProcessor
from rmqpy.broker.processor.send_back import ConsumerSendMsgBackProcessor
from rmqpy.broker.processor.timer_admin import TimerAdminProcessor
from rmqpy.broker.rebalance_lock import RebalanceLockManager
from rmqpy.broker.registration import NameServerRegistration
from rmqpy.broker.replicas.autoswitch import AutoSwitchReplication
from rmqpy.broker.replicas.client import ControllerClient
from rmqpy.broker.replicas.ha import MasterOnlyHA, ReplicaHA
from rmqpy.broker.replicas.identity import identity_files, identity_path
from rmqpy.broker.replicas.manager import ReplicasManager
from rmqpy.broker.roles import RoleServices
from rmqpy.broker.schedule import ScheduleMessageService
from rmqpy.broker.slave_sync import SlaveSynchronize
from rmqpy.broker.stats import BrokerStatsHook, BrokerStatsManager
from rmqpy.broker.subscription import SubscriptionGroupManager
from rmqpy.broker.timer import TimerMessageService
from rmqpy.broker.topic import TopicConfigManager
from rmqpy.broker.transaction import TransactionalMessageService
from rmqpy.protocol.bodies.topic import DataVersion, TopicConfig
from rmqpy.protocol.codes import MQVersion, RequestCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.namesrv import UnRegisterBrokerRequestHeader
from rmqpy.remoting.client import RemotingClient
from rmqpy.remoting.connection_limits import ConnectionCap, remoting_cap
from rmqpy.remoting.dispatch import RequestDispatcher, RequestProcessor
from rmqpy.remoting.limits import ChannelSweeper, ConnectionLimits
from rmqpy.remoting.ratelimit import RateLimitedLogger
from rmqpy.store.api import MessageStore
from rmqpy.store.ha.autoswitch.api import AutoSwitchSettings
from rmqpy.store.ha.autoswitch.service import AutoSwitchHAService
from rmqpy.store.ha.gate import ReplicaGate
from rmqpy.store.ha.replication import Replication
from rmqpy.store.role import MASTER_ID, BrokerRole, RoleState, is_slave, role_of, set_role


def _replicates(store: Any) -> bool:
    """Whether ``store`` has what AutoSwitch HA calls (``ReplicaStore``) and a blocking runner."""
    return all(hasattr(store, name) for name in ("truncate_files", "truncate_dirty_files", "append_to_commit_log",
                                                 "incomplete_tail_offset", "set_replica_confirm_offset",
                                                 "blocking"))


def _loopback(host: str) -> bool:
    """Whether a listen address is the loopback only (a name or a wildcard is not)."""
    import ipaddress
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class BrokerController:
    log = RateLimitedLogger()  # registrations and notifications follow client requests: rate-limited per call site

    def __init__(self, settings: BrokerSettings, reactor: Any, message_store: MessageStore | None = None,
                 stats_log: Callable[[str], None] | None = None) -> None:
        self.log = self.log.on(reactor)
        self.settings = settings
        self.broker_config = settings.broker
        self.netty_config = settings.netty
        self.store_config = settings.store
        self.reactor = reactor
        bc = self.broker_config
        self.store_host = (bc.brokerIP1, self.netty_config.listenPort)
        self.broker_addr = f"{bc.brokerIP1}:{self.netty_config.listenPort}"
        self.config_dir = os.path.join(self.store_config.storePathRootDir, "config")

        # 5.x TopicQueueMappingManager's data version: made at start, never bumped (no static topics),
        # registered as mappingDataVersion like a 5.3.3 broker's
        self.mapping_data_version = DataVersion(timestamp=int(reactor.seconds() * 1000))
        self.topic_config_manager = TopicConfigManager(bc, self.config_dir, on_new_topic=self.topics_changed,
                                                       clock=reactor)
        self.subscription_group_manager = SubscriptionGroupManager(bc, self.config_dir, clock=reactor)
        self.consumer_offset_manager = ConsumerOffsetManager(self.config_dir)
        self.delay_offset_manager = DelayOffsetManager(self.config_dir)
        self.consumer_filter_manager = ConsumerFilterManager()
        self.producer_manager = ProducerManager(self.now_ms, clock=reactor)
        self.consumer_manager = ConsumerManager(self.now_ms, ids_changed=lambda g, n: self.ids_notifier.changed(g, n),
                                                on_register=self._register_filters,
                                                on_unregister=self.consumer_filter_manager.unregister, clock=reactor)
        # NOTIFY_CONSUMER_IDS_CHANGED, coalesced for large groups (rmqpy/broker/ids_notify.py)
        self.ids_notifier = ConsumerIdsNotifier(reactor, self.consumer_manager.channels_of,
                                                lambda: self.broker_config.notifyConsumerIdsChangedEnable,
                                                self.consumer_manager.list_bytes)
        # the default store is built and loaded by initialize() unless one is given
        self.message_store: MessageStore = message_store  # type: ignore[assignment]
        # SYSTEM_BUSY for sends that waited too long (rmqpy/broker/fast_failure.py)
        self.fast_failure = BrokerFastFailure.from_config(reactor, bc, self.store_config,
                                                          message_store.stats if message_store else None)
        self.pull_hold_service = PullRequestHoldService(
            reactor, self.now_ms, self._max_offset, self._wakeup_pull, bc.longPollingEnable, bc.shortPollingTimeMills,
            bc.maxPullPollingSize, bc.maxPullPollingSizePerChannel)
        self.rebalance_lock_manager = RebalanceLockManager(self.now_ms, clock=reactor)
        self.queue_handover = QueueHandover(self.now_ms, reactor.callLater, self.consumer_manager)
        self.broker_stats_manager = BrokerStatsManager(reactor, bc.brokerClusterName, stats_log)
        self.schedule_message_service = ScheduleMessageService(self)
        self.transactional_message_service = TransactionalMessageService(self)
        self.timer_message_service = TimerMessageService(self)  # 5.x timer messages (TIMER_DELIVER_MS...)
        self.pop_service = PopService(self)  # 5.x POP consumption (rmqpy/broker/pop/)
        # while the broker serves, these files are serialized and fsynced in a thread (ConfigManager.save)
        for manager in self._saved_off_reactor():
            manager.write_off_reactor(self._in_thread)
        self.pop_revive_service = PopReviveService(
            self.pop_service, clock=reactor, now_ms=self.now_ms, store=lambda: self.message_store,
            offsets=self.consumer_offset_manager, topics=self.topic_config_manager,
            groups=self.subscription_group_manager, store_host=self.store_host,
            interval_ms=lambda: bc.reviveInterval, is_master=lambda: not is_slave(self.store_config),
            ck_buffer_size=bc.popCkMaxBufferSize)
        self.message_request_mode_manager = MessageRequestModeManager(self.config_dir, reactor)

        self.dispatcher = RequestDispatcher()
        self.dispatcher.add_channel_listener(self)
        # metricsExporterType=PROM: RocketMQ 5's metrics (rmqpy/broker/metrics.py); tap.py serves them
        self.metrics_manager: BrokerMetricsManager | None = None
        if BrokerMetricsManager.enabled(bc):
            self.metrics_manager = BrokerMetricsManager(self, reactor)
            self.dispatcher.rpc_observer = self.metrics_manager.rpc
            # POP revive and timer counters (Java's static PopMetricsManager / DefaultStoreMetricsManager)
            hook = self.metrics_manager.hook
            self.pop_service.metrics = self.pop_revive_service.metrics = self.timer_message_service.metrics = hook
            self.transactional_message_service.metrics = hook
        self.processors: dict[str, Any] = {}
        self.register_processor()
        self.namesrv_client = RemotingClient(reactor, connect_timeout=3.0)
        # a slave's copy of its master's topics, groups and offsets (the master named by the name servers)
        self.slave_synchronize = SlaveSynchronize(
            lambda addr, request: self.namesrv_client.invoke(addr, request, 3.0), self.broker_addr,
            self.topic_config_manager, self.consumer_offset_manager, self.delay_offset_manager,
            self.subscription_group_manager, clock=reactor, timer=self.timer_message_service)
        self.server_factories: list[Any] = []  # the listening sides
        self.remoting_cap: ConnectionCap | None = None  # their connection cap (server_factory)
        # idle / half-sent connections and the partial-frame budget, over both ports
        self.connection_limits = ConnectionLimits.from_config(self.netty_config)
        self.channel_sweeper = ChannelSweeper(reactor, self.connection_limits, config=self.netty_config)
        self.role_services = RoleServices(self)  # the services its role runs (rmqpy/broker/roles.py)
        self._core: service.MultiService | None = None  # the service tree (rmqpy/broker/lifecycle.py)
        self.acl_plain_file = DEFAULT_PLAIN_FILE  # Java's -Drocketmq.acl.plain.file, relative to rocketmqHome
        #: how a slave or replica dials its master's HA port: None, plain TCP; the tap sets a TLS dial for
        #: haUseTLS=true (rmqpy/store/ha/tls.py) before initialize
        self.ha_connect: Callable[[str, Any], Any] | None = None
        self.acl: PlainPermissionManager | None = None
        self.auth: AuthMetadata | None = None  # 5.x users and ACLs (rmqpy/auth/)
        self.auth_pipeline: AuthPipeline | None = None  # their checks, also of gRPC calls (proxy/grpc/auth.py)
        self.registration = NameServerRegistration(self)
        self.replication: ReplicationSide  # built with the store by initialize()
        # enableControllerMode=true: the broker's side of controller mode (rmqpy/broker/replicas/),
        # built by initialize(); its role comes from the controller, fenced until then
        self.replicas_manager: ReplicasManager | None = None
        # its replication (Java's AutoSwitchHAService), listening on haListenPort; None otherwise
        self.autoswitch_ha: AutoSwitchHAService | None = None
        self.started = False
        self.shutting_down = False
        self.isolated = False  # Java isIsolated: controller mode before the controller named the role

    # ------------------------------------------------------------------ setup
    def register_processor(self) -> None:
        """Java ``registerProcessor()``: the one processor of each request code, with the stats hooks."""
        send = SendMessageProcessor(self)
        pull = PullMessageProcessor(self)
        stats_hooks: list[Any] = [BrokerStatsHook(self.broker_stats_manager)]
        if self.metrics_manager is not None:
            stats_hooks.append(self.metrics_manager.hook)
        send.register_send_message_hook(stats_hooks)
        pull.register_consume_message_hook(stats_hooks)
        client = ClientManageProcessor(self)
        consumer = ConsumerManageProcessor(self)
        offsets = StoreOffsetProcessor(self)
        query = QueryMessageProcessor(self)
        send_back = ConsumerSendMsgBackProcessor(self)
        end_transaction = EndTransactionProcessor(self)
        lock = LockBatchProcessor(self)
        reply = ReplyMessageProcessor(self)
        admin = AdminBrokerProcessor(self)
        pop = PopMessageProcessor(self, self.pop_service)
        peek = PeekMessageProcessor(self, self.pop_service)
        ack = AckMessageProcessor(self, self.pop_service)
        change_invisible = ChangeInvisibleTimeProcessor(self, self.pop_service)
        notification = NotificationProcessor(self, self.pop_service)
        polling_info = PollingInfoProcessor(self, self.pop_service)
        assignment = QueryAssignmentProcessor(self, self.message_request_mode_manager)
        recall = RecallMessageProcessor(self)
        table: dict[int, RequestProcessor] = {
            RequestCode.SEND_MESSAGE: send,
            RequestCode.SEND_MESSAGE_V2: send,
            RequestCode.SEND_BATCH_MESSAGE: send,
            RequestCode.PULL_MESSAGE: pull,
            RequestCode.LITE_PULL_MESSAGE: pull,
            RequestCode.HEART_BEAT: client,
            RequestCode.UNREGISTER_CLIENT: client,
            RequestCode.CHECK_CLIENT_CONFIG: client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: consumer,
            RequestCode.QUERY_CONSUMER_OFFSET: consumer,
            RequestCode.UPDATE_CONSUMER_OFFSET: consumer,
            RequestCode.GET_MAX_OFFSET: offsets,
            RequestCode.GET_MIN_OFFSET: offsets,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: offsets,
            RequestCode.GET_EARLIEST_MSG_STORETIME: offsets,
            RequestCode.QUERY_MESSAGE: query,
            RequestCode.VIEW_MESSAGE_BY_ID: query,
            RequestCode.CONSUMER_SEND_MSG_BACK: send_back,
            RequestCode.END_TRANSACTION: end_transaction,
            RequestCode.RECALL_MESSAGE: recall,
            RequestCode.LOCK_BATCH_MQ: lock,
            RequestCode.UNLOCK_BATCH_MQ: lock,
            RequestCode.SEND_REPLY_MESSAGE: reply,
            RequestCode.SEND_REPLY_MESSAGE_V2: reply,
            RequestCode.POP_MESSAGE: pop,
            RequestCode.PEEK_MESSAGE: peek,
            RequestCode.ACK_MESSAGE: ack,
            RequestCode.BATCH_ACK_MESSAGE: ack,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME: change_invisible,
            RequestCode.NOTIFICATION: notification,
            RequestCode.POLLING_INFO: polling_info,
            RequestCode.QUERY_ASSIGNMENT: assignment,
            RequestCode.SET_MESSAGE_REQUEST_MODE: assignment,
            # the admin family (Java's default processor): topics, groups, offsets, stats,
            # config and message queries, each code routed to its handler by AdminBrokerProcessor
            **dict.fromkeys(AdminBrokerProcessor.codes, admin),
        }
        if self.metrics_manager is not None:
            send_back.register_send_back_hook([self.metrics_manager.hook])
            end_transaction.register_end_transaction_hook([self.metrics_manager.hook])
        for built in (send, pull, client, consumer, offsets, query, send_back, end_transaction, lock, reply, admin,
                      pop, peek, ack, change_invisible, notification, polling_info, assignment, recall):
            self.processors[type(built).__name__] = built
        for code, processor in table.items():
            self.dispatcher.register(int(code), processor)
        acl_admin = AclAdminProcessor(lambda: self.acl, self.now_ms, lambda: (
            self.broker_config.brokerName, self.broker_addr, self.broker_config.brokerClusterName))
        self.processors[type(acl_admin).__name__] = acl_admin
        self.dispatcher.register(AclAdminProcessor.codes, acl_admin)
        timer_admin = TimerAdminProcessor(self.timer_message_service, self.store_config)
        self.processors[type(timer_admin).__name__] = timer_admin
        self.dispatcher.register(TimerAdminProcessor.codes, timer_admin)
        replicas = ReplicasProcessor(lambda: self.replicas_manager, self.reactor)
        self.processors[type(replicas).__name__] = replicas
        self.dispatcher.register(ReplicasProcessor.codes, replicas)
        auth_admin = AuthAdminProcessor(lambda: self.auth)
        self.processors[type(auth_admin).__name__] = auth_admin
        self.dispatcher.register(AuthAdminProcessor.codes, auth_admin)

    @property
    def pull_processor(self) -> PullMessageProcessor:
        return self.processors["PullMessageProcessor"]

    def now_ms(self) -> int:
        return int(self.reactor.seconds() * 1000)

    def initialize(self) -> None:
        """Load the config files and the store (Java ``initialize``); raises on failure."""
        for manager in (self.topic_config_manager, self.consumer_offset_manager, self.subscription_group_manager,
                        self.delay_offset_manager, self.message_request_mode_manager, self.pop_service.order_info):
            manager.load()
        if self.message_store is None:
            from rmqpy.store.message_store import MessageStore as DefaultMessageStore
            self.message_store = DefaultMessageStore(self.store_config, self.store_host, self.reactor)
            self.message_store.load()
        self.message_store.add_arrive_listener(self._message_arrived, batch=self._messages_arrived)
        self.pop_service.ensure_revive_topic()
        self.fast_failure.watch(self.message_store.stats)
        if self.broker_config.enableControllerMode:
            self._init_controller_mode()
        else:
            self.replication = Replication(self.message_store, self.store_config, self.reactor, self.ha_connect)
        self.initial_acl()

    def _init_controller_mode(self) -> None:
        """Java ``recoverAndInitService``: the replicas manager, and the broker fenced until the
        controller names its role (no role services, no name-server registration, no puts)."""
        ha: ReplicaHA
        store = self.message_store
        if _replicates(store):  # the default store: AutoSwitch HA on haListenPort (Java's DefaultMessageStore)
            replica_store: Any = store  # a ReplicaStore (checked above), beyond the broker's MessageStore protocol
            service = AutoSwitchHAService(self.reactor, replica_store,
                                          AutoSwitchSettings.from_store_config(self.store_config),
                                          replica_store.blocking.run,
                                          gate=ReplicaGate.from_config(self.reactor, self.store_config,
                                                                       what="AutoSwitch HA"),
                                          connect=self.ha_connect)
            self.autoswitch_ha = service
            ha = service
            self.replication = AutoSwitchReplication(service, store, self.store_config)
        else:  # a store that cannot replicate (the replicas manager's tests): a set of one
            only = MasterOnlyHA(store.get_max_phy_offset)
            ha = only
            self.replication = only
        client = ControllerClient(lambda addr, request, timeout: self.namesrv_client.invoke(addr, request, timeout),
                                  self.namesrv_client.invoke_oneway, self.now_ms)
        identity, temp = identity_files(identity_path(self.store_config.storePathRootDir))

        def reachable(addr: str) -> defer.Deferred[bool]:
            return self.namesrv_client.connection(addr).addCallbacks(lambda _: True, lambda _: False)

        self.replicas_manager = ReplicasManager(self, client, ha, self.reactor, identity, temp, reachable)
        self.set_fenced(True)

    def initial_acl(self) -> None:
        """Java ``initialAcl()`` and ``initialRequestPipeline()``: plain ACL (aclEnable) checks each
        request first, then 5.x authentication and authorization (rmqpy/auth/)."""
        bc = self.broker_config
        signer = AclClientHook.from_credentials(bc.innerClientAuthenticationCredentials)
        if signer is not None:  # the broker's own requests (registration) carry credentials
            self.namesrv_client.request_hooks.append(signer)
        if bc.aclEnable:
            self.acl = PlainPermissionManager(AclPaths(bc.rocketmqHome, self.acl_plain_file))
            self.acl.start()
            self.acl.watch(self.reactor, self.reactor)
            self.dispatcher.add_request_hook(PlainAccessValidator(self.acl.current, self.reactor))
        if auth_in_use(bc):
            self.auth = AuthMetadata(self.config_dir)
            self.auth.load()
            self.auth.init_users(bc.initAuthenticationUser, bc.innerClientAuthenticationCredentials)
            self.auth_pipeline = AuthPipeline(
                self.auth, bc.authenticationEnabled, bc.authorizationEnabled, lambda: bc.brokerClusterName,
                self.reactor, bc.authenticationWhitelist, bc.authorizationWhitelist)
            self.dispatcher.add_request_hook(self.auth_pipeline)
            self.log.info("5.x authentication {authn}, authorization {authz}: {users} users, {acls} ACLs in {path}",
                          authn="on" if bc.authenticationEnabled else "off",
                          authz="on" if bc.authorizationEnabled else "off",
                          users=len(self.auth.users), acls=len(self.auth.acls), path=self.auth.path)
        if bc.authorizationEnabled and not bc.authenticationEnabled:
            self.log.warn("authorizationEnabled=true without authenticationEnabled: requests are authorized as the "
                          "user their AccessKey names, unchecked, so any client may name a Super user (as in Java). "
                          "Set authenticationEnabled=true.")
        if not bc.aclEnable and not bc.authenticationEnabled:
            host = self.netty_config.bindAddress
            if not _loopback(host):
                self.log.warn("The broker listens on {host} (beyond loopback) without access control: any client "
                              "that reaches port {port} may send, consume, create topics and change the "
                              "configuration. Set authenticationEnabled=true and authorizationEnabled=true "
                              "(5.x users and ACLs), or aclEnable=true with {home}/conf/plain_acl.yml, or listen "
                              "on 127.0.0.1 (bindAddress).", host=host or "*", port=self.netty_config.listenPort,
                              home=bc.rocketmqHome or "$ROCKETMQ_HOME")

    # ------------------------------------------------------------------ lifecycle
    def service(self) -> service.MultiService:
        """The broker's service tree (rmqpy/broker/lifecycle.py), built at its first use."""
        if self._core is None:
            self._core = broker_core(self)
        return self._core

    def start(self) -> None:
        """Start the service tree (the tap starts it as a child of its own instead)."""
        self.service().startService()

    # the tree's steps, in start order (rmqpy/broker/lifecycle.py)
    def start_store(self) -> None:
        self.message_store.start()
        self.replication.start()
        self.started = True

    def close_store(self) -> None:
        self.replication.shutdown()
        self.message_store.shutdown()
        self.started = False

    def persist_loaded(self) -> None:
        """Persist what was loaded, so the files exist in Java's format from the start."""
        self.topic_config_manager.persist()
        self.subscription_group_manager.persist()

    def persist_when_saved(self) -> defer.Deferred:
        """The writes under way in threads end before persist_all writes the same files."""
        d = defer.gatherResults([m.when_saved() for m in self._saved_off_reactor()])
        return d.addBoth(lambda _: self.persist_all())

    def stop_acl(self) -> None:
        if self.acl is not None:
            self.acl.stop()

    def register_at_start(self) -> None:
        if not self.isolated:  # controller mode: the replicas manager registers once it has a role
            self.register_broker_all()
        bc = self.broker_config
        if IReactorCore.providedBy(self.reactor):  # logged once the reactor (and its signal handlers) runs
            self.reactor.callWhenRunning(self.log.info, "The broker[{name}, {addr}] boot success. serializeType=JSON and name "
                         "server is {ns}", name=bc.brokerName, addr=self.broker_addr, ns=bc.namesrvAddr)
            # what boot made (modules, services, tables) lives as long as the process: out of the
            # cyclic GC's sight, a full collection no longer walks it (in-process broker: 60k
            # objects, 11 ms per full collection -> under 0.1 ms), one cause of the put path's
            # longest pauses (bench/put_stall_probe.py)
            self.reactor.callWhenRunning(gc.freeze)

    def unregister_at_stop(self) -> defer.Deferred:
        self.registration.cancel()
        d = self.unregister_broker_all() if self.started else defer.succeed(None)
        return d.addBoth(lambda _: self.namesrv_client.close())

    # ------------------------------------------------------------------ role
    @property
    def role(self) -> RoleState:
        """The broker's role and id, as the config holds them (rmqpy/store/role.py)."""
        return RoleState(role_of(self.store_config), self.broker_config.brokerId)

    def hold_role(self, state: RoleState) -> None:
        set_role(self.store_config, state.role)
        self.broker_config.brokerId = state.broker_id

    def switch_role(self, role: BrokerRole, broker_id: int | None = None, register: bool = True) -> None:
        """Java ``changeToMaster`` / ``changeToSlave`` on a running broker: the old role's services
        stop, the new one's start, then the name servers learn it. A master's id is 0; a slave keeps
        its id, 1 when it had the master's (Java changeToSlave)."""
        if broker_id is None:
            current = self.broker_config.brokerId
            broker_id = MASTER_ID if role.is_master else (current if current > 0 else 1)
        state = RoleState(role, broker_id)
        if state == self.role and self.role_services.role is role:
            return
        self.log.info("Begin to change role to {role}, brokerId={id}", role=role.value, id=broker_id)
        self.role_services.switch(state)
        if register and self.started and not self.shutting_down:
            self.register_broker_all()
        self.log.info("Finish to change role to {role}", role=role.value)

    # ------------------------------------------------------------------ controller mode (rmqpy/broker/replicas/)
    def set_fenced(self, fenced: bool) -> None:
        """Java ``ReplicasManager.setFenced``: the broker isolated (no registration with the name
        servers) and its store refusing puts."""
        self.isolated = fenced
        self.message_store.fenced = fenced

    def apply_controller_role(self, role: BrokerRole, broker_id: int, master_address: str | None) -> None:
        """The role the controller gave, through the role switch; the replicas manager registers
        with the name servers after it has moved the data version."""
        self.switch_role(role, broker_id, register=False)
        self.slave_synchronize.master_addr = master_address

    def next_data_version(self, state_version: int) -> None:
        """Java ``DataVersion.nextVersion(stateVersion)`` of the topic table: the master epoch."""
        version = self.topic_config_manager.data_version
        version.stateVersion = state_version
        version.next_version(self.now_ms())

    def shutdown(self) -> defer.Deferred:
        """Stop the service tree; the Deferred fires once the files are written and the store closed."""
        core = self.service()
        if core.running:
            return core.stopService()
        self.shutting_down = True  # never started: the files and the store are still written and closed
        self.stop_acl()
        self.namesrv_client.close()
        return self.persist_when_saved().addBoth(lambda _: self.close_store())

    def persist_all(self) -> None:
        self.consumer_offset_manager.persist()
        self.topic_config_manager.persist()
        self.subscription_group_manager.persist()
        self.delay_offset_manager.persist()
        self.message_request_mode_manager.flush()
        self.pop_service.order_info.persist()

    def _saved_off_reactor(self) -> tuple[ConfigManager, ...]:
        return (self.topic_config_manager, self.subscription_group_manager, self.consumer_offset_manager,
                self.pop_service.order_info)

    def persist_order_info(self) -> None:
        """Every 10 s, as Java: the orderly pops' batches in flight (config/consumerOrderInfo.json)."""
        self.pop_service.order_info.save()

    def persist_offsets(self) -> None:
        """Every flushConsumerOffsetInterval (5 s): the consumer offsets are copied here and written in
        a thread, coalesced (a write still under way when the next comes leaves one more, of the newest
        copy). On the reactor their JSON alone took 16 ms for 1,000 group-topics of 8 queues and 116 ms
        for 5,000, a pause of every request that often. Delay offsets are a handful: written here."""
        self.consumer_offset_manager.save()
        self.delay_offset_manager.persist()

    def _in_thread(self, fn: Callable[..., Any], *args: Any) -> defer.Deferred:
        """``fn(*args)`` in the reactor's thread pool; inline on a reactor without one (task.Clock)."""
        if not IReactorThreads.providedBy(self.reactor):
            return defer.maybeDeferred(fn, *args)
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), fn, *args)

    # ------------------------------------------------------------------ channels
    def channel_connected(self, channel: Any) -> None:
        pass

    def channel_closed(self, channel: Any) -> None:
        self.producer_manager.channel_closed(channel)

        def notify(group: str) -> bool:
            sgc = self.subscription_group_manager.table.get(group)
            return sgc.notifyConsumerIdsChangedEnable if sgc is not None else True

        self.consumer_manager.channel_closed(channel, notify)
        self.queue_handover.channel_closed(channel.remote_address)

    def server_factory(self) -> Any:
        """A factory for one listening port; all ports share the dispatcher."""
        from rmqpy.broker.server import BrokerServerFactory
        if self.remoting_cap is None:  # one cap for the listen and fast ports, computed when the first is made
            self.remoting_cap = remoting_cap(self.netty_config, self.reactor, "broker", self.broker_config.openFileReserve)
        factory = BrokerServerFactory(self.dispatcher, self.reactor, self.now_ms,
                                      max_frame=self.netty_config.frameMaxLength, limits=self.connection_limits,
                                      cap=self.remoting_cap)
        self.server_factories.append(factory)
        self.channel_sweeper.add(factory)
        return factory

    def scan_not_active_channels(self) -> None:
        # idle connections (serverChannelMaxIdleTimeSeconds) are closed by channel_sweeper
        timeout = self.broker_config.channelExpiredTimeoutMills
        for channel in (self.producer_manager.scan_not_active_channel(timeout)
                        + self.consumer_manager.scan_not_active_channel(timeout)):
            channel.close()

    def _register_filters(self, group: str, subs: list[Any]) -> None:
        for sub in subs:
            if not sub.is_tag:
                self.consumer_filter_manager.register(group, sub)

    # ------------------------------------------------------------------ store hooks
    def _max_offset(self, topic: str, queue_id: int) -> int:
        return self.message_store.get_max_offset_in_queue(topic, queue_id)

    def _message_arrived(self, topic: str, queue_id: int, logic_offset: int, tags_code: int | None = None,
                         store_ts: int = 0, properties: Any = None, *rest: Any) -> None:
        # each wake-up on its own: a failure of one (logged, rate-limited: it may recur on every
        # message) must not keep the other's waiters waiting
        try:
            self.pull_hold_service.notify_message_arriving(topic, queue_id, logic_offset, tags_code, store_ts,
                                                           properties)
        except Exception:  # noqa: BLE001
            self.log.failure("waking the pulls held on {topic}:{queue_id} failed", topic=topic, queue_id=queue_id)
        try:
            self.pop_service.notify_arrival(topic)
        except Exception:  # noqa: BLE001
            self.log.failure("waking the pops held on {topic} failed", topic=topic)

    def _messages_arrived(self, topic: str, queue_id: int, store_ts: int, records: Any) -> None:
        """:meth:`_message_arrived` of each record of a batch put, ``(phy, size, tags_code,
        queue_offset, properties)``; nothing when no pull is held on the queue and no pop on
        the topic (each would return at once)."""
        if self.pull_hold_service.is_holding(topic, queue_id) or self.pop_service.is_holding(topic):
            for _phy, _size, tags_code, queue_offset, props in records:
                self._message_arrived(topic, queue_id, queue_offset + 1, tags_code, store_ts, props)

    def _wakeup_pull(self, req: Any) -> None:
        self.pull_processor.execute_request_when_wakeup(req)

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, offset: int) -> bool:
        store = self.message_store
        try:
            phy = store.get_commit_log_offset_in_queue(topic, queue_id, offset)
            max_phy = store.get_max_phy_offset()
            from rmqpy.store.message_store import TOTAL_PHYSICAL_MEMORY_SIZE
        except Exception:
            return False
        if phy <= 0 and offset != 0:
            return False
        memory = TOTAL_PHYSICAL_MEMORY_SIZE * self.store_config.accessMessageInMemoryMaxRatio / 100.0
        return (max_phy - phy) > memory

    def prepare_transaction_message(self, msg: Any) -> defer.Deferred:
        return self.transactional_message_service.prepare_message(msg)

    # ------------------------------------------------------------------ name servers
    def topics_changed(self, tc: TopicConfig) -> None:
        """A topic was created on demand: register it promptly (coalesced, alone: see registration.py)."""
        if not self.started or self.shutting_down or self.isolated:
            return
        self.registration.topic_created(tc)

    def register_broker_all(self) -> defer.Deferred:
        """A full registration with every name server (rmqpy/broker/registration.py)."""
        return self.registration.register_all()

    def register_periodically(self) -> defer.Deferred | None:
        """Every registerNameServerPeriod, unless isolated (Java: "Skip register for broker is isolated")."""
        return None if self.isolated else self.register_broker_all()

    def register_topics(self, topics: list[TopicConfig]) -> defer.Deferred:
        """Java's registerIncrementBrokerData: ``topics`` alone (rmqpy/broker/registration.py)."""
        return self.registration.register_topics(topics)

    def unregister_broker_all(self) -> defer.Deferred:
        bc = self.broker_config
        results = []
        for addr in bc.namesrv_addrs:
            header = UnRegisterBrokerRequestHeader(brokerName=bc.brokerName, brokerAddr=self.broker_addr,
                                                   clusterName=bc.brokerClusterName, brokerId=bc.brokerId)
            d = self.namesrv_client.invoke(addr, RemotingCommand.request(
                RequestCode.UNREGISTER_BROKER, header, version=MQVersion.CURRENT), 3.0)
            d.addErrback(lambda f, a: self.log.warn("unregister broker from {a} failed: {e}", a=a,
                                                    e=f.getErrorMessage()), addr)
            results.append(d)
        return defer.gatherResults(results) if results else defer.succeed(None)
