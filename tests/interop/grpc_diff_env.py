"""The two endpoints of the differential harness (tests/interop/grpc_diff.py), started once:
rmqpy's name server and broker with its gRPC port, and Apache's proxy in front of the Java name
server and broker of the same version (:data:`VERSION`, 5.3.3, unless ``Both(..., version=...)``
asks for another, such as 5.4.0, a broker + proxy fetched only when asked: jvm.SERVER_ONLY_VERSIONS);
both with the same topics and groups, created over remoting.

Both brokers create no topic or group on demand, so that an unknown one is unknown on both.
"""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.interop import grpc_diff, jvm, servers

VERSION = "5.3.3"
#: the versions ``Both`` can start as the reference
REFERENCE_VERSIONS = (VERSION, *jvm.SERVER_ONLY_VERSIONS)
HOST = "127.0.0.1"
BROKER_PROPS: dict[str, object] = {"brokerName": grpc_diff.BROKER_NAME, "autoCreateTopicEnable": False,
                                   "autoCreateSubscriptionGroup": False}
_TYPED = {"FIFO", "DELAY", "TRANSACTION", "NORMAL", "PRIORITY"}
#: the topic types a broker version does not know (its UPDATE_AND_CREATE_TOPIC refuses them)
UNKNOWN_TYPES = {"5.3.3": {"PRIORITY"}}


def create_resources(broker_addr: str, version: str | None = None) -> None:
    """The harness's topics (``message.type`` from their key in TOPICS) and groups, on one broker
    (a Java one of ``version``: not the topics of a type it does not know)."""
    for kind, topic in grpc_diff.TOPICS.items():
        kind = kind.removesuffix("_EMPTY")
        if kind in UNKNOWN_TYPES.get(version or "", ()):
            continue
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                  "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": str(kind == "FIFO").lower()}
        if kind in _TYPED:
            fields["attributes"] = f"+message.type={kind}"
        code, remark, _, _ = jvm.remoting_request(broker_addr, 17, {k: str(v) for k, v in fields.items()})
        assert code == 0, (broker_addr, topic, code, remark)
    for group, orderly in ((grpc_diff.GROUP, False), (grpc_diff.FIFO_GROUP, True), (grpc_diff.HANDLE_GROUP, False)):
        body = json.dumps({"groupName": group, "consumeEnable": True, "consumeBroadcastEnable": True,
                           "consumeMessageOrderly": orderly, "retryQueueNums": 1, "retryMaxTimes": 16,
                           "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True,
                           "groupSysFlag": 0, "consumeTimeoutMinute": 15}).encode()
        code, remark, _, _ = jvm.remoting_request(broker_addr, 200, body=body)
        assert code == 0, (broker_addr, group, code, remark)


def wait_routes(namesrv_addr: str, timeout: float = 30, version: str | None = None) -> None:
    """Until the name server routes every topic of the harness (the proxy asks it) that
    ``create_resources`` made."""
    deadline = time.monotonic() + timeout
    for kind, topic in grpc_diff.TOPICS.items():
        if kind.removesuffix("_EMPTY") in UNKNOWN_TYPES.get(version or "", ()):
            continue
        while True:
            code, _, _, _ = jvm.remoting_request(namesrv_addr, 105, {"topic": topic})
            if code == 0:
                break
            assert time.monotonic() < deadline, f"{topic} not routed by {namesrv_addr}"
            time.sleep(0.2)


class Both:
    """Both targets, up and provisioned; ``close()`` stops everything started."""

    def __init__(self, tmp: Path, version: str = VERSION) -> None:
        if version not in REFERENCE_VERSIONS:
            raise ValueError(f"no reference proxy {version!r}; known: {REFERENCE_VERSIONS}")
        self.version = version
        if version in jvm.SERVER_ONLY_VERSIONS:
            jvm.ensure_built(server_versions=(version,))
        self.rmqpy: servers.Cluster | None = None
        self.java: jvm.JavaCluster | None = None
        self.proxy: jvm.JavaProcess | None = None
        self.targets: list[grpc_diff.Target] = []
        try:
            with ThreadPoolExecutor(2) as pool:  # the JVMs take longest: start them beside rmqpy
                java = pool.submit(self._start_java, tmp)
                port = servers.free_port()
                self.rmqpy = servers.Cluster(tmp / "rmqpy", HOST, {**BROKER_PROPS, "grpcServerPort": port})
                create_resources(self.rmqpy.broker_addr)
                wait_routes(self.rmqpy.ns_addr)
                java.result()
            self.ours = grpc_diff.Target("rmqpy", f"{HOST}:{port}")
            self.targets.append(self.ours)
            assert self.proxy is not None
            self.theirs = grpc_diff.Target("proxy", f"{HOST}:{self.proxy.port}")
            self.targets.append(self.theirs)
            for t in self.targets:
                t.open_sessions()
        except BaseException:
            self.close()
            raise

    def _start_java(self, tmp: Path) -> None:
        self.java = jvm.JavaCluster(self.version, tmp / "java", HOST, BROKER_PROPS)
        create_resources(self.java.broker_addr, self.version)
        wait_routes(self.java.ns_addr, version=self.version)
        self.proxy = jvm.start_java_proxy(self.version, tmp / "proxy", self.java.ns_addr)

    def close(self) -> None:
        for t in self.targets:
            t.close()
        if self.proxy is not None:
            self.proxy.kill9()
        if self.java is not None:
            self.java.close(clean=False)
        if self.rmqpy is not None:
            self.rmqpy.close()
