"""Capture golden frames from the real Java name server, broker, client and mqadmin.

    python -m tests.interop.capture_golden

Writes ``tests/data/golden/java-<version>.frames``. Run once (and again after a version
bump); the unit tests check that every captured frame decodes and re-encodes to the same
bytes and that every JSON body parses.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from tests.interop import jvm, servers
from tests.interop.recorder import RecordingProxy, write_frames

OUT = Path(__file__).resolve().parents[1] / "data" / "golden"


def capture(version: str) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix=f"golden-{version}-"))
    ns_port, proxy_ns_port = servers.free_port(), servers.free_port()
    namesrv = jvm.start_java_namesrv(version, ns_port, tmp / "ns")
    ns_proxy = RecordingProxy(("127.0.0.1", proxy_ns_port), ("127.0.0.1", ns_port), "namesrv")
    ns = f"127.0.0.1:{proxy_ns_port}"
    broker_port = servers.free_port()
    # 5.x binds only bindAddress, so the proxy can take the advertised 127.0.0.2:port; 4.9
    # binds the wildcard address and its client<->broker traffic is not captured.
    proxied_broker = not version.startswith("4.")
    props = {"brokerName": "broker-g", "listenPort": broker_port}
    broker_proxy = None
    if proxied_broker:
        props["bindAddress"] = "127.0.0.1"
        broker_proxy = RecordingProxy(("127.0.0.2", broker_port), ("127.0.0.1", broker_port), "broker")
    broker = jvm.start_java_broker(version, tmp / "broker", ns, props,
                                   broker_ip="127.0.0.2" if proxied_broker else "127.0.0.1")
    try:
        for args in (["updateTopic", "-c", "DefaultCluster", "-t", "GoldenTopic", "-r", "2", "-w", "2"],
                     ["clusterList"], ["topicList"], ["topicRoute", "-t", "GoldenTopic"],
                     ["updateKvConfig", "-s", "GOLD", "-k", "k", "-v", "v"],
                     ["deleteKvConfig", "-s", "GOLD", "-k", "k"]):
            jvm.mqadmin(version, args, ns)
        jvm.harness(version, ["produce", "-n", ns, "--topic", "GoldenTopic", "--count", "3", "--tags", "T",
                              "--keys", "k{i}", "--prop", "color=blue"])
        jvm.harness(version, ["produce", "-n", ns, "--topic", "GoldenTopic", "--count", "4", "--mode", "batch",
                              "--batch-size", "2"])
        jvm.harness(version, ["consume-push", "-n", ns, "--topic", "GoldenTopic", "--group", "golden_g",
                              "--count", "7", "--timeout-ms", "60000"], timeout=120)
    finally:
        broker.stop()
        namesrv.stop()
        ns_proxy.close()
        if broker_proxy:
            broker_proxy.close()
    frames = ns_proxy.frames + (broker_proxy.frames if broker_proxy else [])
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"java-{version}.frames"
    write_frames(path, frames)
    print(f"{path}: {len(frames)} frames")
    return path


if __name__ == "__main__":
    for v in ("4.9.8", "5.3.3"):
        capture(v)
