"""Name server configuration: NamesrvConfig, as Java names its keys; NettyServerConfig is
:mod:`rmqpy.remoting.netty_config`'s, shared with the broker."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from rmqpy.remoting.netty_config import NAMESRV_PORT, NettyServerConfig


def _home(*parts: str) -> str:
    return os.path.join(os.path.expanduser("~"), *parts)


@dataclass
class NamesrvConfig:
    rocketmqHome: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    kvConfigPath: str = field(default_factory=lambda: _home("namesrv", "kvConfig.json"))
    configStorePath: str = field(default_factory=lambda: _home("namesrv", "namesrv.properties"))
    productEnvName: str = "center"
    clusterTest: bool = False
    orderMessageEnable: bool = False
    returnOrderTopicConfigToBroker: bool = True
    # 5.3.3 scans every 5 s (4.9.7 every 10 s, not configurable) and expires brokers silent for 120 s.
    scanNotActiveBrokerInterval: int = 5_000
    brokerChannelExpiredTime: int = 120_000
    configBlackList: str = "configBlackList;configStorePath;kvConfigPath"
    # rmqpy (Java has none): path, TLS, ACL and address keys UPDATE_NAMESRV_CONFIG may change anyway,
    # ";"-separated, "*" for all of them as in Java; read from the config file only
    remoteConfigUpdateAllowKeys: str = ""
    # rmqpy (Java has none): bounds of the KV config any client may PUT_KV_CONFIG into; a put over
    # one is refused with an error answer (read at start; UPDATE_NAMESRV_CONFIG does not change them)
    kvConfigMaxKeyLength: int = 255       # namespace and key, characters
    kvConfigMaxValueLength: int = 16384   # characters
    kvConfigMaxKeys: int = 10000          # all namespaces together
    # rmqpy: the broker's metrics keys (Java's 5.x name server exports no metrics): DISABLE or PROM,
    # rocketmq_rpc_latency and the reactor's lag on metricsPromExporterHost (bindAddress when blank):
    # metricsPromExporterPort, 5558 so that it does not collide with a broker's 5557 on one host
    metricsExporterType: str = "DISABLE"
    metricsPromExporterHost: str = ""
    metricsPromExporterPort: int = 5558
    metricsLabel: str = ""
    # rmqpy log files (rmqpy/common/logfiles.py): Java's per-component files under logDir (none when
    # empty: only twistd's log, as before), rolled at logMaxFileSize or daily, logMaxIndex kept
    logDir: str = ""
    logLevel: str = ""
    logMaxFileSize: int = 128 * 1024 * 1024
    logMaxIndex: int = 10
    logRollingPolicy: str = "size"
    # 5.x: run the controller in this process (rmqpy/controller/, on PySyncObj), on its own
    # controllerDLegerPeers address; its keys (ControllerConfig's) are read from the same file
    enableControllerInNamesrv: bool = False


def netty_server_config() -> NettyServerConfig:
    """The name server's NettyServerConfig: listenPort 9876 (NamesrvStartup)."""
    return NettyServerConfig(listenPort=NAMESRV_PORT)


IMPORTANT_KEYS = ("rocketmqHome", "kvConfigPath", "listenPort", "orderMessageEnable")
