"""NettyServerConfig: the server keys of the name server and the broker, one class as in Java.

Java's ``org.apache.rocketmq.remoting.netty.NettyServerConfig`` (5.3.3's fields, a superset of
4.9.7's: 5.x adds ``bindAddress``, ``serverNettyWorkerGroupEnable``, ``enableShutdownGracefully``
and ``shutdownWaitTimeSeconds``), plus rmqpy's own limits. Both servers print every field (``-p``,
GET_NAMESRV_CONFIG, GET_BROKER_CONFIG) as Java prints its object. Java's thread-pool and socket
keys are accepted and listed; rmqpy runs on one reactor thread and does not use them.
"""
from __future__ import annotations

from dataclasses import dataclass

NAMESRV_PORT = 9876  # NamesrvStartup's listenPort
BROKER_PORT = 10911  # BrokerStartup's listenPort


@dataclass
class NettyServerConfig:
    # 5.x: the address both servers bind (4.9 binds every interface)
    bindAddress: str = "0.0.0.0"
    # Java's field default is 0 (5.x) / 8888 (4.9); each server sets its own (NAMESRV_PORT, BROKER_PORT)
    listenPort: int = 0
    serverWorkerThreads: int = 8
    serverCallbackExecutorThreads: int = 0
    serverSelectorThreads: int = 3
    serverOnewaySemaphoreValue: int = 256
    serverAsyncSemaphoreValue: int = 64
    serverChannelMaxIdleTimeSeconds: int = 120
    serverSocketSndBufSize: int = 0
    serverSocketRcvBufSize: int = 0
    # 0: Netty's default, 64 KiB high / 32 KiB low. Above the high mark the connection is not read
    # until its replies are flushed; Twisted resumes at an empty buffer, so the low mark is accepted
    # for Java configs and not used.
    writeBufferHighWaterMark: int = 0
    writeBufferLowWaterMark: int = 0
    serverSocketBacklog: int = 1024
    serverNettyWorkerGroupEnable: bool = True
    serverPooledByteBufAllocatorEnable: bool = True
    enableShutdownGracefully: bool = False
    shutdownWaitTimeSeconds: int = 30
    useEpollNativeSelector: bool = False
    # com.rocketmq.remoting.frameMaxLength (a JVM property in Java)
    frameMaxLength: int = 16 * 1024 * 1024
    # rmqpy (Java has none): unsent reply bytes above the high mark before the connection is closed,
    # how long a frame may stay half-sent, and the partial frames all connections may buffer together
    serverChannelMaxUnsentBytes: int = 32 * 1024 * 1024
    serverPartialFrameTimeoutSeconds: int = 60
    serverPartialFramesMaxBytes: int = 256 * 1024 * 1024
    # rmqpy (Java has none): connections the remoting ports hold at once (a broker's listenPort and fast
    # port together), in all and per source address; 0 = from the open-file limit (what the store's
    # reserve leaves, one descriptor a connection) and half of that per address, < 0 = no cap
    serverMaxConnections: int = 0
    serverMaxConnectionsPerAddress: int = 0
