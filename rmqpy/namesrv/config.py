"""Name server configuration: NamesrvConfig and NettyServerConfig keys, as Java names them."""
from __future__ import annotations

import os
from dataclasses import dataclass, field


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
    # Java scans every 10 s (4.9) / 5 s (5.x) and expires brokers silent for 120 s.
    scanNotActiveBrokerInterval: int = 10_000
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


@dataclass
class NettyServerConfig:
    listenPort: int = 9876
    bindAddress: str = "0.0.0.0"
    serverChannelMaxIdleTimeSeconds: int = 120
    # com.rocketmq.remoting.frameMaxLength
    frameMaxLength: int = 16 * 1024 * 1024
    # Java's NettyServerConfig (0: Netty's default, 64 KiB high / 32 KiB low). Above the high mark the
    # connection is not read until its replies are flushed; Twisted resumes at an empty buffer, so the
    # low mark is accepted for Java configs and not used.
    writeBufferHighWaterMark: int = 0
    writeBufferLowWaterMark: int = 0
    # rmqpy (Java has none): unsent reply bytes above the high mark before the connection is closed,
    # how long a frame may stay half-sent, and the partial frames all connections may buffer together
    serverChannelMaxUnsentBytes: int = 32 * 1024 * 1024
    serverPartialFrameTimeoutSeconds: int = 60
    serverPartialFramesMaxBytes: int = 256 * 1024 * 1024


IMPORTANT_KEYS = ("rocketmqHome", "kvConfigPath", "listenPort", "orderMessageEnable")
