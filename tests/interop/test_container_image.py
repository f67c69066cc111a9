"""The container image (container/Containerfile), built and run as a user runs it, with podman.

The image is built from the repository with the suite's podman configuration. Its base is the
suite's debootstrapped Debian (``isolation.ensure_podman_image``: no registry on CI), into which the
Containerfile installs Debian's python3 and then rmqpy and its dependencies from PyPI with pip.
Layers are cached in the suite's podman storage like any podman build's; a clean machine builds
them all (measured: ~25 s, besides the base image that ``setup_host.sh`` debootstraps anyway).
Behind a TLS-intercepting proxy (as on this CI) pip needs the host's CA bundle: it is mounted into
the build and named by ``PIP_CERT``, the Containerfile's documented way.

Two containers from the one image, each with the command a user gives (the compose file's):
``mqnamesrv -c conf/namesrv.conf`` and ``mqbroker -c conf/broker.conf -n ... -D brokerIP1=...``,
in the host's network (``--network=host``: podman's own network layer would touch the firewall,
which the suite never does), on free ports given with ``-D``, their store and logs on bind-mounted
volumes. The official Java 5.3.3 producer and push consumer run in a third container (the suite's
podman client host, its own network namespace) and must see every message they sent, and so
must the official Python client over the broker's gRPC port (the README's path); the
image's HEALTHCHECK (``podman healthcheck run``: no systemd timers here) reports both healthy; the
broker's Prometheus endpoint counts the traffic under RocketMQ's metric names; the store and log
files on the volumes belong to the image's non-root user.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.interop import clients, isolation, jvm, servers
from tests.interop.test_metrics_logs import parse, value
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "container" / "Containerfile"
COMPOSE = ROOT / "container" / "compose.yaml"
IMAGE = "localhost/rmqpy:ci"
UID = 10001
CONF = "/home/rocketmq/conf"
TOPIC, GROUP, COUNT = "TContainer", "g_container", 40
GRPC_TOPIC = "TContainerGrpc"
PY_CLIENT = Path(__file__).parent / "pyclient" / "grpc_client.py"
#: the README's compose and `podman run -p` commands, run in a network namespace of their own
COMPOSE_CONFINED = Path(__file__).parent / "container" / "compose_confined.sh"
#: the host's CA bundle, for pip behind a TLS-intercepting proxy (harmless without one)
HOST_CA = "/etc/ssl/certs/ca-certificates.crt"


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([*isolation.podman_base(), *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, f"podman {' '.join(args)}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def image() -> dict:
    if isolation.isolation_kind() != "podman":
        pytest.skip("the container image test needs podman: RMQPY_INTEROP_ISOLATION=podman")
    base = isolation.ensure_podman_image(build=True)
    argv = ["build", "--format", "docker", "--network=host", "--build-arg", f"BASE={base}",
            "-f", str(CONTAINERFILE), "-t", IMAGE]
    if os.path.isfile(HOST_CA):
        argv += ["-v", f"{HOST_CA}:/run/host-ca.crt:ro", "--build-arg", "PIP_CERT=/run/host-ca.crt"]
    started = time.monotonic()
    podman(*argv, str(ROOT), timeout=900)
    print(f"podman build of {IMAGE}: {time.monotonic() - started:.1f} s")
    # the previous build's image and the cache layers only it used are dangling now: without this,
    # each change of the source would leave a chain of them in the suite's podman storage
    podman("image", "prune", "-f", timeout=300)
    return json.loads(podman("image", "inspect", IMAGE).stdout)[0]


class Containers:
    """Server containers of this test, named as the suite's stale cleanup recognises
    (``rmqpy-<pid>-0-c<n>``: a killed run's are removed by the next run)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def run(self, mounts: dict[Path, str], argv: list[str]) -> str:
        name = f"rmqpy-{os.getpid()}-0-c{len(self.names) + 1}"
        volumes = []
        for host_dir, target in mounts.items():
            host_dir.mkdir(parents=True, exist_ok=True)
            os.chown(host_dir, UID, UID)  # as a named volume would be: the image's user owns it
            volumes += ["-v", f"{host_dir}:{target}"]
        podman("run", "-d", "--name", name, "--network=host", "--health-interval=disable", *volumes, IMAGE, *argv)
        self.names.append(name)
        return name

    def healthy(self, name: str, timeout: float) -> None:
        """Runs the image's HEALTHCHECK until it passes (podman schedules it with systemd timers,
        which this host lacks), then reads the status podman records."""
        def check() -> bool:
            state = json.loads(podman("inspect", name).stdout)[0]["State"]
            assert state["Running"], f"{name} exited {state['ExitCode']}:\n{self.logs(name)}"
            return podman("healthcheck", "run", name, check=False).returncode == 0
        assert wait_until(check, timeout, 0.5), f"{name} never healthy:\n{self.logs(name)}"
        status = podman("inspect", "--format", "{{.State.Health.Status}}", name).stdout.strip()
        assert status == "healthy", status

    def logs(self, name: str) -> str:
        proc = podman("logs", name, check=False)
        return (proc.stdout + proc.stderr)[-4000:]

    def stop(self, name: str) -> int:
        podman("stop", "-t", "30", name, timeout=60)
        return int(podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip())

    def remove(self) -> None:
        if self.names:
            podman("rm", "-f", "-t", "0", *self.names, check=False)


def _py_client(host, endpoint: str, *args: str) -> jvm.Events:
    if importlib.util.find_spec("rocketmq") is None:
        pytest.fail("rocketmq-python-client (the test extra) is not installed")
    proc = host.run([sys.executable, str(PY_CLIENT), endpoint, *args], timeout=120)
    assert proc.returncode == 0, f"grpc_client {args} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return jvm.Events(jvm._parse_lines(proc.stdout))


def scrape(host: str, port: int):
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:
        return parse(r.read().decode())


def test_image_recipe_and_compose_agree(image: dict) -> None:
    """What the image promises a user: its non-root user, volumes, ports, healthcheck and the
    name server as its default command; compose.yaml's two services run that image's commands."""
    config = image["Config"]
    assert config["User"] == f"{UID}:{UID}", config["User"]
    assert set(config["Volumes"]) == {"/home/rocketmq/store", "/home/rocketmq/logs"}, config["Volumes"]
    assert {"9876/tcp", "10911/tcp", "10909/tcp", "5557/tcp", "5558/tcp"} <= set(config["ExposedPorts"])
    assert image["Healthcheck"]["Test"] == ["CMD", "rmqpy-healthcheck"], image.get("Healthcheck")
    assert config["Cmd"] == ["mqnamesrv", "-c", f"{CONF}/namesrv.conf"], config["Cmd"]
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert set(services) == {"namesrv", "broker"}, services
    for svc in services.values():
        assert svc["build"]["dockerfile"] == "container/Containerfile"
        assert (COMPOSE.parent / svc["build"]["context"]).resolve() == ROOT
    assert services["namesrv"]["command"] == config["Cmd"]
    # stated again in compose.yaml: podman-compose builds OCI images, which drop the HEALTHCHECK
    for svc in services.values():
        assert svc["healthcheck"]["test"] == image["Healthcheck"]["Test"], svc.get("healthcheck")
    broker = services["broker"]["command"]
    assert broker[:3] == ["mqbroker", "-c", f"{CONF}/broker.conf"] and broker[3:5] == ["-n", "namesrv:9876"], broker
    assert services["broker"]["depends_on"]["namesrv"]["condition"] == "service_healthy"
    assert "/home/rocketmq/store" in " ".join(services["broker"]["volumes"])


def test_java_client_through_the_image(image: dict, java_built, client_host, tmp_path: Path) -> None:
    ip = client_host.host_ip
    ns_port, ns_metrics = servers.free_port(), servers.free_port()
    broker_port, broker_metrics, grpc = servers.free_port(), servers.free_port(), servers.free_port()
    ns_addr = f"{ip}:{ns_port}"
    ctrs = Containers()
    try:
        namesrv = ctrs.run({tmp_path / "ns-logs": "/home/rocketmq/logs"}, [
            "mqnamesrv", "-c", f"{CONF}/namesrv.conf", "-D", f"listenPort={ns_port}",
            "-D", f"metricsPromExporterPort={ns_metrics}"])
        ctrs.healthy(namesrv, 60)
        broker = ctrs.run({tmp_path / "store": "/home/rocketmq/store", tmp_path / "logs": "/home/rocketmq/logs"}, [
            "mqbroker", "-c", f"{CONF}/broker.conf", "-n", ns_addr, "-D", f"brokerIP1={ip}",
            "-D", f"listenPort={broker_port}", "-D", f"metricsPromExporterPort={broker_metrics}",
            "-D", f"grpcServerPort={grpc}", "-D", "mappedFileSizeCommitLog=4194304"])
        ctrs.healthy(broker, 60)
        # the check fails where nothing answers (it is not `true`)
        assert podman("exec", broker, "rmqpy-healthcheck", f"127.0.0.1:{servers.free_port()}",
                      check=False).returncode == 1
        # the broker registered: rmqpy-admin of the image, as a user would run it
        assert wait_until(lambda: "broker-a" in podman("exec", broker, "rmqpy-admin", "clusterList",
                                                       "-n", ns_addr, check=False).stdout, 30, 0.5)

        sent = clients.harness(client_host, "5.3.3", ["produce", "-n", ns_addr, "--topic", TOPIC,
                                                      "--count", str(COUNT)])
        sent_ids = {e["msgId"] for e in sent.of("sent") if e["status"] == "SEND_OK"}
        assert len(sent_ids) == COUNT, sent[-5:]
        got = clients.harness(client_host, "5.3.3", [
            "consume-push", "-n", ns_addr, "--topic", TOPIC, "--group", GROUP, "--count", str(COUNT),
            "--from", "first", "--timeout-ms", "60000"], timeout=120)
        assert {e["msgId"] for e in got.of("received")} == sent_ids

        samples = scrape(ip, broker_metrics)
        labels = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a", "topic": TOPIC}
        assert value(samples, "rocketmq_messages_in_total", message_type="normal", **labels) == COUNT
        assert value(samples, "rocketmq_messages_out_total", consumer_group=GROUP, **labels) == COUNT
        assert value(samples, "rocketmq_rpc_latency_milliseconds_count", request_code="send_message_v2",
                     response_code="success") == COUNT
        assert value(samples, "rocketmq_storage_size_bytes") > 0
        ns_samples = scrape(ip, ns_metrics)
        assert value(ns_samples, "rocketmq_rpc_latency_milliseconds_count", request_code="register_broker",
                     node_type="namesrv") >= 1

        # the README's path for Python: a topic made with the image's rmqpy-admin, then the official
        # Python client (gRPC, RocketMQ 5) sends and receives through the broker container
        assert "success" in podman("exec", broker, "rmqpy-admin", "updateTopic", "-n", ns_addr, "-c", "DefaultCluster",
                                   "-t", GRPC_TOPIC).stdout
        sent_py = _py_client(client_host, f"{ip}:{grpc}", "produce", GRPC_TOPIC, "5")
        got_py = _py_client(client_host, f"{ip}:{grpc}", "receive", GRPC_TOPIC, "g_container_py", "5", "15")
        assert sorted(e["msgId"] for e in got_py.of("received")) == sorted(e["msgId"] for e in sent_py.of("sent"))

        # a clean stop (SIGTERM through podman stop) and what it left on the volumes
        assert ctrs.stop(broker) == 0, ctrs.logs(broker)
        assert ctrs.stop(namesrv) == 0, ctrs.logs(namesrv)
        topics = tmp_path / "store" / "config" / "topics.json"
        assert TOPIC in topics.read_text() and topics.stat().st_uid == UID
        assert any((tmp_path / "store" / "commitlog").iterdir())
        assert "boot success" in (tmp_path / "logs" / "rocketmqlogs" / "broker.log").read_text()
        assert (tmp_path / "ns-logs" / "rocketmqlogs" / "namesrv.log").stat().st_uid == UID
    finally:
        ctrs.remove()


def test_readme_compose_path_confined() -> None:
    """The README's "In containers" section as a user runs it, through podman's own network layer
    (compose's bridge, the published ports), which the rest of the suite never uses: so it runs in
    a private network namespace whose firewall tables and bridge vanish with it
    (tests/interop/container/compose_confined.sh, which says how). `podman-compose up -d --build`,
    both services healthy in `ps`, rmqpy-admin updateTopic in the broker container, the README's
    official Python client program unchanged on 127.0.0.1:8081, the metrics on 5557 and 5558,
    `down -v`; then the README's `podman run -p` commands with the broker advertising the host's
    address, the same client through it."""
    if isolation.isolation_kind() != "podman":
        pytest.skip("the compose path needs podman: RMQPY_INTEROP_ISOLATION=podman")
    isolation.ensure_podman_image(build=True)
    compose = Path(sys.executable).parent / "podman-compose"
    if not compose.exists():
        pytest.fail("podman-compose (the test extra) is not installed")
    started = time.monotonic()
    proc = subprocess.run(["bash", str(COMPOSE_CONFINED)], capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, PYTHON=sys.executable, PODMAN_COMPOSE=str(compose)))
    print(proc.stdout[-3000:])
    print(f"compose_confined.sh: {time.monotonic() - started:.1f} s")
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    for step in ("both healthy", "topic made", "official Python client: sent and received",
                 "metrics: broker (5557) counted the message", "podman run -p: registered at",
                 "README path passed", "cleaned up (exit 0)"):
        assert step in proc.stdout, step
