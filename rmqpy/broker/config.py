"""Broker configuration: RocketMQ's BrokerConfig / NettyServerConfig keys and defaults.

One ``broker.conf`` properties file feeds three objects, as in ``BrokerStartup``:
:class:`BrokerConfig`, :class:`NettyServerConfig` and the store's ``MessageStoreConfig``.
Key names are RocketMQ's, so a Java broker's conf file works here unchanged.
"""
from __future__ import annotations

import copy
import os
import socket
from dataclasses import dataclass, field
from typing import Callable

from rmqpy.auth.config import check_auth_config
from rmqpy.broker.configfile import write_config
from rmqpy.common.properties import PropertiesError, apply_properties, config_items, format_properties, load_properties, store_properties
from rmqpy.common.startup import check_defines
from rmqpy.remoting.netty_config import BROKER_PORT, NettyServerConfig
from rmqpy.store.config import MessageStoreConfig
from rmqpy.store.role import MASTER_ID, role_of


def local_address() -> str:
    """``RemotingUtil.getLocalAddress``: the first non-loopback IPv4 address (else 127.0.0.1)."""
    candidates: list[str] = []
    try:
        # the address of the interface that would route to the outside world; no packet is sent
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            candidates.append(s.getsockname()[0])
    except OSError:
        pass
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            candidates.append(str(info[4][0]))
    except OSError:
        pass
    for ip in candidates:
        if not ip.startswith("127.") and ip != "0.0.0.0":
            return ip
    return "127.0.0.1"


def _hostname() -> str:
    try:
        return socket.gethostname() or "DEFAULT_BROKER"
    except OSError:
        return "DEFAULT_BROKER"


# Keys Java marks @ImportantField (printed by ``-m``).
# keys whose values are secrets: GET_BROKER_CONFIG answers them masked
SECRET_KEYS = frozenset({"innerClientAuthenticationCredentials", "initAuthenticationUser"})

IMPORTANT_KEYS = frozenset({
    "namesrvAddr", "brokerIP1", "brokerName", "brokerClusterName", "brokerId", "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup", "msgTraceTopicName", "traceTopicEnable", "rejectTransactionMessage",
    "fetchNamesrvAddrByAddressServer", "transactionTimeOut", "transactionCheckMax",
    "transactionCheckInterval", "aclEnable", "listenPort", "storePathRootDir", "storePathCommitLog",
    "flushDiskType", "brokerRole", "deleteWhen", "fileReservedTime", "haListenPort",
})


@dataclass
class BrokerConfig:
    rocketmqHome: str | None = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME"))
    namesrvAddr: str | None = field(default_factory=lambda: os.environ.get("NAMESRV_ADDR"))
    brokerIP1: str = field(default_factory=local_address)
    brokerIP2: str = field(default_factory=local_address)
    brokerName: str = field(default_factory=_hostname)
    brokerClusterName: str = "DefaultCluster"
    brokerId: int = 0
    brokerPermission: int = 6
    defaultTopicQueueNums: int = 8
    autoCreateTopicEnable: bool = True
    clusterTopicEnable: bool = True
    brokerTopicEnable: bool = True
    autoCreateSubscriptionGroup: bool = True
    msgTraceTopicName: str = "RMQ_SYS_TRACE_TOPIC"
    traceTopicEnable: bool = False
    flushConsumerOffsetInterval: int = 1000 * 5
    flushConsumerOffsetHistoryInterval: int = 1000 * 60
    rejectTransactionMessage: bool = False
    fetchNamesrvAddrByAddressServer: bool = False
    longPollingEnable: bool = True
    shortPollingTimeMills: int = 1000
    # rmqpy (Java holds pulls without bound; cf. its maxPopPollingSize = 100000 for POP): held pulls in
    # all and per connection; a pull that cannot be held is answered PULL_NOT_FOUND at once
    maxPullPollingSize: int = 100000
    maxPullPollingSizePerChannel: int = 10000
    notifyConsumerIdsChangedEnable: bool = True
    highSpeedMode: bool = False
    traceOn: bool = True
    regionId: str = "DefaultRegion"
    registerBrokerTimeoutMills: int = 24000  # 5.3.3's (4.9.7: 6000)
    slaveReadEnable: bool = False
    startAcceptSendRequestTimeStamp: int = 0
    # RECALL_MESSAGE (rmqpy/broker/processor/recall.py): off by default, as Java's
    recallMessageEnable: bool = False
    allowRecallWhenBrokerNotWriteable: bool = True
    enablePropertyFilter: bool = False
    filterSupportRetry: bool = False
    compressedRegister: bool = False
    forceRegister: bool = True
    # 5.x: the table registered in parts of splitRegistrationSize topics (rmqpy also splits on its own a
    # table too big for one frame even compressed: rmqpy/broker/registration.py)
    enableSplitRegistration: bool = False
    splitRegistrationSize: int = 800
    # 5.x: a topic created alone goes by REGISTER_TOPIC_IN_NAMESRV instead of an incremental registration
    enableSingleTopicRegister: bool = False
    registerNameServerPeriod: int = 1000 * 30
    transactionTimeOut: int = 6 * 1000
    transactionCheckMax: int = 15
    # 5.3.3's (4.9.7 had 60 s): a transaction left UNKNOW is asked about within ~30 s + transactionTimeOut
    transactionCheckInterval: int = 30 * 1000
    aclEnable: bool = False
    # 5.x AuthConfig's key: {"accessKey": "...", "secretKey": "..."} signs the broker's own requests
    # (registration with the name servers), as BrokerOuterAPI's AclClientRPCHook; never listed by
    # GET_BROKER_CONFIG (SECRET_KEYS)
    innerClientAuthenticationCredentials: str = ""
    # 5.x AuthConfig (rmqpy/auth/): users and ACLs in <storePathRootDir>/config/auth.json. The
    # provider/strategy keys accept blank or Java's default class names only (rmqpy/auth/config.py)
    authenticationEnabled: bool = False
    authenticationProvider: str = ""
    authenticationMetadataProvider: str = ""
    authenticationStrategy: str = ""
    authenticationWhitelist: str = ""
    # {"username": "...", "password": "..."}: created as a Super user when missing
    initAuthenticationUser: str = ""
    authorizationEnabled: bool = False
    authorizationProvider: str = ""
    authorizationMetadataProvider: str = ""
    authorizationStrategy: str = ""
    authorizationWhitelist: str = ""
    migrateAuthFromV1Enabled: bool = False
    # Java's BrokerConfig.configBlackList: keys UPDATE_BROKER_CONFIG refuses, on top of brokerConfigPath,
    # rocketmqHome and configBlackList (AdminBrokerProcessor.initConfigBlackList)
    configBlackList: str = "configBlackList;brokerConfigPath"
    # rmqpy (Java has none): path, TLS, ACL and address keys UPDATE_BROKER_CONFIG may change anyway,
    # ";"-separated, "*" for all of them as in Java; read from the config file only
    remoteConfigUpdateAllowKeys: str = ""
    storeReplyMessageEnable: bool = True
    # rmqpy (Java has no bound): most read/write queues a topic may have; larger counts are
    # refused by UPDATE_AND_CREATE_TOPIC and clamped when read from topics.json
    maxTopicQueueNums: int = 1024
    # rmqpy: how often client channels are scanned and how long they may stay silent
    channelScanIntervalMills: int = 10 * 1000
    channelExpiredTimeoutMills: int = 120 * 1000
    # Java's BrokerFastFailure: sends that waited this long are answered SYSTEM_BUSY
    # (rmqpy/broker/fast_failure.py says how the wait is measured on a reactor)
    brokerFastFailureEnable: bool = True
    waitTimeMillsInSendQueue: int = 200
    # POP consumption (RocketMQ 5, rmqpy/broker/pop/): Java's keys and defaults
    reviveQueueNum: int = 8
    reviveInterval: int = 1000
    popCkMaxBufferSize: int = 200000
    maxPopPollingSize: int = 100000
    popPollingSize: int = 1024
    popFromRetryProbability: int = 20
    enableRetryTopicV2: bool = False
    initPopOffsetByCheckMsgInMem: bool = True
    popResponseReturnActualRetryTopic: bool = False
    defaultMessageRequestMode: str = "PULL"
    defaultPopShareQueueNum: int = -1
    serverLoadBalancerEnable: bool = True
    # the gRPC endpoint of RocketMQ 5 clients (proxy/grpc/): the Java proxy's keys and port;
    # grpcServerPort=-1 turns it off. Calls are coroutines of grpcio's asyncio server: a call in
    # progress (a client's Telemetry stream, a long poll) takes no thread; grpcThreadPoolQueueCapacity
    # of them at once, more are refused RESOURCE_EXHAUSTED (the proxy's bound on work waiting for its
    # executor). grpcThreadPoolNums (the proxy's executor threads) is accepted and has no use here.
    grpcServerPort: int = 8081
    grpcThreadPoolNums: int = field(default_factory=lambda: 16 + 2 * (os.cpu_count() or 1))
    grpcThreadPoolQueueCapacity: int = 100000
    grpcMaxInboundMessageSize: int = 130 * 1024 * 1024
    # the gRPC port's bounds (docs/operations.md, "Limits"): a connection without a call (grpcio) or
    # without a byte either way (the front) for grpcClientIdleTimeMills is closed, as the proxy's
    # maxConnectionIdle; the caps (rmqpy's) count connections of the port and of one source address,
    # 0 = from the open-file limit (what openFileReserve leaves, 3 descriptors a connection) and a
    # quarter of that per address, < 0 = none; grpcFrontMaxPendingBytes: bytes held per connection
    # before grpcio's loopback connection exists
    grpcClientIdleTimeMills: int = 120 * 1000
    grpcMaxConnections: int = 0
    grpcMaxConnectionsPerAddress: int = 0
    grpcFrontMaxPendingBytes: int = 256 * 1024
    # descriptors kept for the store's own files when a port's connection cap is computed from the
    # open-file limit (which the broker raises to the hard limit at start); 0 = a quarter, at least
    # 1,024 (or half the limit when that is less)
    openFileReserve: int = 0
    # a PushConsumer's receive (auto_renew): the proxy's invisible time and renewal of its receipt
    # handles (proxy/grpc/receipts.py), ProxyConfig's keys and defaults
    enableProxyAutoRenew: bool = True
    defaultInvisibleTimeMills: int = 60 * 1000
    renewSchedulePeriodMillis: int = 5 * 1000
    renewAheadTimeMillis: int = 10 * 1000
    renewMaxTimeMillis: int = 3 * 3600 * 1000
    maxRenewRetryTimes: int = 3
    invisibleTimeMillisWhenClear: int = 1000
    # Java 5.x metrics (rmqpy/broker/metrics.py): DISABLE or PROM (OTLP_GRPC and LOG are not served);
    # the Prometheus endpoint listens on metricsPromExporterHost (brokerIP1 when blank):metricsPromExporterPort
    metricsExporterType: str = "DISABLE"
    metricsPromExporterHost: str = ""
    metricsPromExporterPort: int = 5557
    metricsLabel: str = ""  # extra labels on every sample, "k:v,k2:v2"
    metricsInDelta: bool = False  # adds aggregation="delta" as Java does (the values stay cumulative)
    metricsOtelCardinalityLimit: int = 50 * 1000
    metricsGrpcExporterTarget: str = ""
    metricsGrpcExporterHeader: str = ""
    metricGrpcExporterTimeOutInMills: int = 3 * 1000
    metricGrpcExporterIntervalInMills: int = 60 * 1000
    metricLoggingExporterIntervalInMills: int = 10 * 1000
    # 5.x controller mode (RIP-44, rmqpy/broker/replicas/): the broker takes its id and role from the
    # controller leader among controllerAddr (";"-separated; one host:port resolved to all its
    # addresses with fetchControllerAddrByDnsLookup), heartbeats to every controller and re-reads
    # its replica set; Java's keys and defaults
    enableControllerMode: bool = False
    controllerAddr: str = ""
    fetchControllerAddrByDnsLookup: bool = False
    syncBrokerMetadataPeriod: int = 5 * 1000
    checkSyncStateSetPeriod: int = 5 * 1000
    syncControllerMetadataPeriod: int = 10 * 1000
    controllerHeartBeatTimeoutMills: int = 10 * 1000
    brokerHeartbeatInterval: int = 1000
    sendHeartbeatTimeoutMillis: int = 1000
    brokerElectionPriority: int = 2147483647
    # rmqpy log files (rmqpy/common/logfiles.py): Java's per-component files under logDir (none when
    # empty: only twistd's log, as before), rolled at logMaxFileSize or daily, logMaxIndex kept
    logDir: str = ""
    logLevel: str = ""
    logMaxFileSize: int = 128 * 1024 * 1024
    logMaxIndex: int = 10
    logRollingPolicy: str = "size"

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in (self.namesrvAddr or "").split(";") if a.strip()]


@dataclass
class BrokerSettings:
    """Everything read from ``-c``/``-n``: the three config objects plus where they came from."""

    broker: BrokerConfig = field(default_factory=BrokerConfig)
    netty: NettyServerConfig = field(default_factory=lambda: NettyServerConfig(listenPort=BROKER_PORT))
    store: MessageStoreConfig = field(default_factory=MessageStoreConfig)
    config_file: str | None = None
    unknown_keys: list[str] = field(default_factory=list)

    @property
    def objects(self) -> list[object]:
        return [self.broker, self.netty, self.store]

    def items(self, important_only: bool = False) -> list[tuple[str, object]]:
        out = []
        for obj in self.objects:
            for key, value in config_items(obj):
                if not important_only or key in IMPORTANT_KEYS:
                    out.append((key, value))
        return out

    def format(self, important_only: bool = False) -> str:
        return format_properties(self.items(important_only))


def load_settings(config_file: str | None = None, namesrv_addr: str | None = None,
                  warn: Callable[[str], None] | None = None,
                  defines: dict[str, str] | None = None) -> BrokerSettings:
    """Build the settings as ``BrokerStartup.createBrokerController`` does: defaults (the store
    under ``~/store`` as Java's ``${user.home}/store``), the ``config_file``, the ``-D``
    ``defines``, then ``namesrv_addr`` (``-n``).

    Raises :class:`PropertiesError` for a malformed file, a bad value or an unknown ``-D`` key
    (the message names the file and line or key).
    """
    settings = BrokerSettings()
    if config_file:
        props = load_properties(config_file)
        settings.config_file = os.path.abspath(config_file)
        try:
            settings.unknown_keys = apply_properties(settings.objects, props, warn)
        except PropertiesError as exc:
            raise PropertiesError(f"{config_file}: {exc}") from None
    if defines:
        try:
            check_defines(settings.objects, defines)
            apply_properties(settings.objects, defines)
        except PropertiesError as exc:
            raise PropertiesError(f"-D {exc}") from None
    if namesrv_addr:
        settings.broker.namesrvAddr = namesrv_addr
    validate(settings)
    return settings


def validate(settings: BrokerSettings) -> None:
    b = settings.broker
    for addr in b.namesrv_addrs:
        host, _, port = addr.rpartition(":")
        if not host or not port.isdigit():
            raise PropertiesError(f"namesrvAddr: {addr!r} is not host:port "
                                  f"(use ';' to separate several name servers)")
    try:
        role = role_of(settings.store)
    except ValueError:  # MessageStoreConfig.validate names it
        role = None
    if b.enableControllerMode:  # Java BrokerStartup: the controller gives the id and the role
        if not b.controllerAddr.strip():
            raise PropertiesError("enableControllerMode=true needs controllerAddr (host:port;host:port...)")
    elif role is not None and role.is_master:
        b.brokerId = MASTER_ID
    elif role is not None and b.brokerId <= 0:
        raise PropertiesError("Slave's brokerId must be > 0")
    # Java: the HA port follows the listen port
    settings.store.haListenPort = settings.netty.listenPort + 1
    b.registerNameServerPeriod = min(60000, max(10000, b.registerNameServerPeriod))
    if not 1 <= b.reviveQueueNum <= 512:
        raise PropertiesError(f"reviveQueueNum: {b.reviveQueueNum} is not in 1..512")
    check_auth_config(b)
    if b.defaultMessageRequestMode not in ("PULL", "POP"):
        raise PropertiesError(f"defaultMessageRequestMode: {b.defaultMessageRequestMode!r} is not PULL or POP")
    if not (b.grpcServerPort == -1 or 0 <= b.grpcServerPort <= 65535):
        raise PropertiesError(f"grpcServerPort: {b.grpcServerPort} is not -1 (off) or a port")
    if b.grpcThreadPoolQueueCapacity < 1:
        raise PropertiesError(f"grpcThreadPoolQueueCapacity: {b.grpcThreadPoolQueueCapacity} is not positive")
    for key in ("openFileReserve", "grpcFrontMaxPendingBytes"):
        if getattr(b, key) < 0:
            raise PropertiesError(f"{key}: {getattr(b, key)} is negative")
    for key, low in (("defaultInvisibleTimeMills", 1000), ("renewSchedulePeriodMillis", 100),
                     ("renewAheadTimeMillis", 0), ("renewMaxTimeMillis", 0), ("maxRenewRetryTimes", 0),
                     ("invisibleTimeMillisWhenClear", 0)):
        if not low <= getattr(b, key) <= 12 * 3600 * 1000:  # maxInvisibleTimeMills bounds them all
            raise PropertiesError(f"{key}: {getattr(b, key)} is not in {low}..{12 * 3600 * 1000}")
    if b.reviveInterval < 10:
        raise PropertiesError(f"reviveInterval: {b.reviveInterval} ms is below 10 ms")
    try:
        settings.store.validate()
    except ValueError as exc:
        raise PropertiesError(str(exc)) from None



def check_update(settings: BrokerSettings, props: dict[str, str]) -> None:
    """Raise PropertiesError unless ``settings`` updated with ``props`` passes the checks of a start.

    UPDATE_BROKER_CONFIG persists to the ``-c`` file: a value the start-up checks refuse
    (``flushDiskType=x``, ``mappedFileSizeConsumeQueue=7``) would keep the broker from
    starting again, so it is refused before anything is set.
    """
    candidate = copy.deepcopy(settings)
    apply_properties(candidate.objects, props)
    validate(candidate)


def default_config_path() -> str:
    """``BrokerPathConfigHelper``'s default: ``~/store/config/broker.properties``."""
    return os.path.join(os.path.expanduser("~"), "store", "config", "broker.properties")


def persist_settings(settings: BrokerSettings) -> str:
    """Write the settings back to the ``-c`` file, as Java's ``Configuration.persist`` does after
    UPDATE_BROKER_CONFIG, so that an update survives a restart; returns the path written.

    The file keeps every key it had (keys no config object knows, such as ``tls.*``, too),
    known keys take their current values and the other known keys are added. As Java's
    ``MixAll.string2File``: written to ``<file>.tmp``, the previous content kept in
    ``<file>.bak``, then renamed over the file.
    """
    path = settings.config_file or default_config_path()
    props: dict[str, str] = {}
    if os.path.exists(path):
        try:
            props.update(load_properties(path))
        except PropertiesError as exc:
            # rewriting it would drop the keys we cannot read (tls.* among them)
            raise OSError(f"not rewriting {path}, it cannot be read back: {exc}") from None
    for key, value in settings.items():
        if value is None:
            continue
        props[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    # escaped as Properties.store escapes: a value holding "\n" stays one value (issue 11)
    write_config(os.path.abspath(path), store_properties(props.items()))
    return path
