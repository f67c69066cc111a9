"""MessageStoreConfig: RocketMQ 4.9 ``MessageStoreConfig`` keys and defaults (facts §7.4)."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
from dataclasses import dataclass, field

from rmqpy.store.role import BrokerRole

CQ_STORE_UNIT_SIZE = 20


def _home_store() -> str:
    return os.path.join(os.path.expanduser("~"), "store")


_TIME_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> dict[int, int]:
    """``"1s 5s 10s ..."`` -> {level: delay ms} for levels 1..N."""
    out = {}
    for i, item in enumerate(text.split(), start=1):
        unit = item[-1]
        if unit not in _TIME_UNITS:
            raise ValueError(f"bad messageDelayLevel item {item!r}")
        out[i] = int(item[:-1]) * _TIME_UNITS[unit]
    return out


@dataclass
class MessageStoreConfig:
    storePathRootDir: str = field(default_factory=_home_store)
    storePathCommitLog: str | None = None  # default: <root>/commitlog
    mappedFileSizeCommitLog: int = 1024 * 1024 * 1024
    mappedFileSizeConsumeQueue: int = 300000 * CQ_STORE_UNIT_SIZE
    enableConsumeQueueExt: bool = False
    flushIntervalCommitLog: int = 500
    commitIntervalCommitLog: int = 200
    flushCommitLogTimed: bool = True
    flushIntervalConsumeQueue: int = 1000
    cleanResourceInterval: int = 10000
    deleteCommitLogFilesInterval: int = 100
    deleteConsumeQueueFilesInterval: int = 100
    destroyMapedFileIntervalForcibly: int = 1000 * 120
    redeleteHangedFileInterval: int = 1000 * 120
    deleteWhen: str = "04"
    diskMaxUsedSpaceRatio: int = 75
    fileReservedTime: int = 72
    maxMessageSize: int = 1024 * 1024 * 4
    checkCRCOnRecover: bool = True
    flushCommitLogLeastPages: int = 4
    flushConsumeQueueLeastPages: int = 2
    flushCommitLogThoroughInterval: int = 1000 * 10
    flushConsumeQueueThoroughInterval: int = 1000 * 60
    maxTransferBytesOnMessageInMemory: int = 1024 * 256
    maxTransferCountOnMessageInMemory: int = 32
    maxTransferBytesOnMessageInDisk: int = 1024 * 64
    maxTransferCountOnMessageInDisk: int = 8
    accessMessageInMemoryMaxRatio: int = 40
    messageIndexEnable: bool = True
    maxHashSlotNum: int = 5000000
    maxIndexNum: int = 5000000 * 4
    maxMsgsNumBatch: int = 64
    messageIndexSafe: bool = False
    haListenPort: int = 10912
    # rmqpy only (issue 31): the address haListenPort listens on (empty: the remoting ports' bindAddress,
    # as Java's all-interfaces), and who may connect to it (IPs and CIDR blocks, comma-separated; empty:
    # everyone, as Java). See rmqpy/store/ha/gate.py.
    haListenAddress: str = ""
    haAllowedReplicaAddresses: str = ""
    # rmqpy only: TLS on the HA port with the tls.* keys (rmqpy/store/ha/tls.py); Java's HA has none
    haUseTLS: bool = False
    brokerRole: str = "ASYNC_MASTER"
    # classic HA (rmqpy/store/ha/): Java 4.9's names and defaults
    haMasterAddress: str = ""  # the master's HA host:port; empty: learnt from the name server
    haSendHeartbeatInterval: int = 1000 * 5
    haHousekeepingInterval: int = 1000 * 20
    haTransferBatchSize: int = 1024 * 32
    haSlaveFallbehindMax: int = 1024 * 1024 * 256
    # 5.x: a classic slave this far behind the master's end is not in sync (mqadmin haStatus)
    haMaxGapNotInSync: int = 1024 * 1024 * 256
    slaveTimeout: int = 3000
    # 5.x controller mode (rmqpy/broker/replicas/autoswitch.py): how many replicas a SYNC put needs,
    # counting the master: every one of the in-sync set, or inSyncReplicas, and minInSyncReplicas before
    # a put is written; and a replica's own handshake flags and how long it may lag in the in-sync set
    allAckInSyncStateSet: bool = False
    inSyncReplicas: int = 1
    minInSyncReplicas: int = 1
    syncFromLastFile: bool = False
    asyncLearner: bool = False
    haMaxTimeSlaveNotCatchup: int = 1000 * 15
    flushDiskType: str = "ASYNC_FLUSH"
    syncFlushTimeout: int = 1000 * 5
    messageDelayLevel: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    # 5.x timer messages (TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS), see rmqpy/broker/timer.py
    timerWheelEnable: bool = True
    timerMaxDelaySec: int = 3600 * 24 * 3
    timerPrecisionMs: int = 1000
    flushDelayOffsetInterval: int = 1000 * 10
    cleanFileForciblyEnable: bool = True
    offsetCheckInSlave: bool = False
    duplicationEnable: bool = False
    diskFallRecorded: bool = True
    osPageCacheBusyTimeOutMills: int = 1000
    defaultQueryMaxNum: int = 32
    transientStorePoolEnable: bool = False
    enableScheduleMessageStats: bool = True
    # rmqpy only: skip the exclusive file lock (read-only tools)
    readOnly: bool = False

    # ------------------------------------------------------------------ helpers
    @classmethod
    def from_properties(cls, props: dict[str, str], *, ignore_unknown: bool = True) -> "MessageStoreConfig":
        """Build from broker.conf-style string properties; unknown keys are ignored
        (the broker config shares the file) unless ``ignore_unknown`` is False."""
        cfg = cls()
        cfg.update_from_properties(props, ignore_unknown=ignore_unknown)
        return cfg

    def update_from_properties(self, props: dict[str, str], *, ignore_unknown: bool = True) -> None:
        types = {f.name: f.type for f in dataclasses.fields(self)}
        for key, raw in props.items():
            if key not in types:
                if ignore_unknown:
                    continue
                raise KeyError(f"unknown message store config key {key!r}")
            setattr(self, key, _convert(key, types[key], raw))
        self.validate()

    def to_properties(self) -> dict[str, str]:
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None:
                continue
            out[f.name] = ("true" if v else "false") if isinstance(v, bool) else str(v)
        return out

    def validate(self) -> None:
        if self.flushDiskType not in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            raise ValueError(f"flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH, not {self.flushDiskType!r}")
        BrokerRole.parse(self.brokerRole)
        if self.mappedFileSizeConsumeQueue % CQ_STORE_UNIT_SIZE:
            raise ValueError("mappedFileSizeConsumeQueue must be a multiple of 20")
        parse_delay_levels(self.messageDelayLevel)
        from rmqpy.store.ha.gate import parse_allowed  # here: the HA package imports Twisted
        parse_allowed(self.haAllowedReplicaAddresses)
        if self.haListenAddress:
            try:
                ipaddress.ip_address(self.haListenAddress)
            except ValueError:
                raise ValueError(f"haListenAddress: {self.haListenAddress!r} is not an IP address") from None

    # derived paths ---------------------------------------------------------
    @property
    def commitlog_dir(self) -> str:
        return self.storePathCommitLog or os.path.join(self.storePathRootDir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.storePathRootDir, "consumequeue")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.storePathRootDir, "index")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.storePathRootDir, "checkpoint")

    @property
    def abort_path(self) -> str:
        return os.path.join(self.storePathRootDir, "abort")

    @property
    def lock_path(self) -> str:
        return os.path.join(self.storePathRootDir, "lock")

    @property
    def config_dir(self) -> str:
        return os.path.join(self.storePathRootDir, "config")

    @property
    def delay_levels(self) -> dict[int, int]:
        return parse_delay_levels(self.messageDelayLevel)

    @property
    def sync_flush(self) -> bool:
        return self.flushDiskType == "SYNC_FLUSH"


def _convert(key: str, typ, raw):
    if not isinstance(raw, str):
        return raw
    t = str(typ)
    s = raw.strip()
    if t == "bool":
        if s.lower() in ("true", "1", "yes"):
            return True
        if s.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"{key}: expected true/false, got {raw!r}")
    if t == "int":
        try:
            return int(s)
        except ValueError:
            raise ValueError(f"{key}: expected an integer, got {raw!r}") from None
    if s == "" and "None" in t:
        return None
    return s
