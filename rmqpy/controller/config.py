"""The controller's configuration: Java ``ControllerConfig``'s keys, as ControllerStartup reads them
from ``-c controller.conf``, mapped onto PySyncObj.

``controllerDLegerPeers`` (``n0-127.0.0.1:9878;n1-...``) names each controller and the address
brokers and mqadmin reach it at (``controllerAddr``): as in Java, a controller serves the
remoting protocol on its own peer address. Raft itself cannot share that port (PySyncObj speaks
its own protocol), so it runs on the peer's port plus ``controllerRaftPortOffset`` unless
``controllerRaftPeers`` (same format) names its addresses. The keys Java has for things rmqpy does
not do (JRaft, DLedger's mapped files, thread pools) are read and reported as
not applying (:data:`NOT_APPLIED`), never silently taken.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from rmqpy.remoting.netty_config import NettyServerConfig


def _home(*parts: str) -> str:
    return os.path.join(os.path.expanduser("~"), *parts)


@dataclass
class ControllerConfig:
    rocketmqHome: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    configStorePath: str = field(default_factory=lambda: _home("controller", "controller.properties"))
    controllerType: str = "DLedger"
    scanNotActiveBrokerInterval: int = 5_000
    controllerThreadPoolNums: int = 16
    controllerRequestThreadPoolQueueCapacity: int = 50_000
    controllerDLegerGroup: str = ""
    controllerDLegerPeers: str = ""
    controllerDLegerSelfId: str = ""
    mappedFileSize: int = 1024 * 1024 * 1024
    controllerStorePath: str = ""
    electMasterMaxRetryCount: int = 3
    enableElectUncleanMaster: bool = False
    isProcessReadEvent: bool = False
    notifyBrokerRoleChanged: bool = True
    scanInactiveMasterInterval: int = 5_000
    # Java's metrics keys: DISABLE or PROM (rmqpy/controller/metrics.py), on metricsPromExporterHost
    # (bindAddress when blank, 0.0.0.0 by default as Java's):metricsPromExporterPort; in rmqpy's name
    # server the name server's endpoint serves the controller's samples too
    metricsExporterType: str = "DISABLE"
    metricsPromExporterHost: str = ""
    metricsPromExporterPort: int = 5557
    metricsLabel: str = ""
    metricsInDelta: bool = False
    configBlackList: str = "configBlackList;configStorePath"
    # rmqpy: where PySyncObj listens (see the module's text)
    controllerRaftPeers: str = ""
    controllerRaftPortOffset: int = 10_000
    # rmqpy: Raft's election timeout range, ms (PySyncObj raftMinTimeout / raftMaxTimeout)
    controllerRaftMinTimeoutMillis: int = 400
    controllerRaftMaxTimeoutMillis: int = 1_400


#: keys of Java's ControllerConfig (and its JraftConfig) that rmqpy reads but does not act on, and why
NOT_APPLIED = {
    "controllerThreadPoolNums": "requests are served on the reactor",
    "controllerRequestThreadPoolQueueCapacity": "requests are served on the reactor",
    "mappedFileSize": "PySyncObj keeps its own journal file",
    "isProcessReadEvent": "reads are answered from the leader's applied state",
    "jRaftGroupId": "the controller runs on PySyncObj, not JRaft",
    "jRaftServerId": "the controller runs on PySyncObj, not JRaft",
    "jRaftInitConf": "the controller runs on PySyncObj, not JRaft",
    "jRaftControllerRPCAddr": "the controller runs on PySyncObj, not JRaft",
    "jRaftElectionTimeoutMs": "the controller runs on PySyncObj, not JRaft",
    "jRaftSnapshotIntervalSecs": "the controller runs on PySyncObj, not JRaft",
    "jRaftScanWaitTimeoutMs": "the controller runs on PySyncObj, not JRaft",
}


def parse_peers(text: str) -> dict[str, str]:
    """``n0-host:port;n1-host:port`` -> ``{"n0": "host:port", ...}`` in the given order."""
    peers: dict[str, str] = {}
    for item in text.split(";"):
        item = item.strip()
        if not item:
            continue
        peer_id, sep, address = item.partition("-")
        if not sep or not peer_id or ":" not in address:
            raise ValueError(f"controller peer {item!r} is not id-host:port")
        peers[peer_id.strip()] = address.strip()
    return peers


def raft_peers(config: ControllerConfig, peers: dict[str, str]) -> dict[str, str]:
    """Where each peer's Raft listens: ``controllerRaftPeers``, else the peer port + the offset."""
    if config.controllerRaftPeers.strip():
        raft = parse_peers(config.controllerRaftPeers)
        if set(raft) != set(peers):
            raise ValueError("controllerRaftPeers must name the same ids as controllerDLegerPeers")
        return raft
    raft = {}
    for peer_id, address in peers.items():
        host, _, port = address.rpartition(":")
        raft_port = int(port) + config.controllerRaftPortOffset
        if not 0 < raft_port < 65536:
            raise ValueError(f"peer {peer_id}: {port} + controllerRaftPortOffset is not a port; "
                             "set controllerRaftPeers")
        raft[peer_id] = f"{host}:{raft_port}"
    return raft


def netty_server_config() -> NettyServerConfig:
    """Unused for its port (the controller listens on its peer address, as DLedger's does), kept
    for the Netty keys a controller.conf may carry."""
    return NettyServerConfig(listenPort=19876)


IMPORTANT_KEYS = ("controllerDLegerGroup", "controllerDLegerPeers", "controllerDLegerSelfId", "controllerStorePath")
