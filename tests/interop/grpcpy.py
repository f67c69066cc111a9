"""The official Python gRPC client (``rocketmq-python-client`` 5.1.2, PyPI) driven from the client
host against one gRPC endpoint, and the scenarios that test_grpc_python.py (rmqpy's own endpoint)
and test_proxy_grpc_python.py (Apache's proxy) both run.

:class:`PyGrpc` runs tests/interop/pyclient/grpc_client.py in the client host and reads its JSON
lines; mqadmin 5.3.3 (in the same host) creates topics and groups through the name server. The
``check_*`` functions are the scenarios: what a Python user sees, asserted the same way whatever
serves the endpoint.
"""
from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from tests.interop import clients, jvm
from tests.interop.waiting import concurrently  # noqa: F401 (grpcpy.concurrently, as before)
from tests.reference import to_run

CLIENT = Path(__file__).parent / "pyclient" / "grpc_client.py"
VERSION = "5.3.3"


class PyGrpc:
    def __init__(self, host, endpoint: str, ns_addr: str, env: dict[str, str] | None = None) -> None:
        self.host, self.endpoint, self.ns_addr, self.env = host, endpoint, ns_addr, env

    def mqadmin(self, *args: str) -> str:
        return clients.mqadmin(self.host, VERSION, list(args), self.ns_addr)

    def create_topic(self, topic: str, *extra: str) -> None:
        out = self.mqadmin("updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "4", "-w", "4", *extra)
        assert "success" in out, out

    def create_group(self, group: str, *extra: str) -> None:
        out = self.mqadmin("updateSubGroup", "-c", "DefaultCluster", "-g", group, *extra)
        assert "success" in out, out

    def create_topic_and_group(self, topic: str, topic_extra: tuple[str, ...], group: str, *extra: str) -> None:
        """:meth:`create_topic` then :meth:`create_group`, both in one mqadmin JVM (clients.mqadmin_batch)."""
        outs = clients.mqadmin_batch(self.host, VERSION, [
            ["updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "4", "-w", "4", *topic_extra],
            ["updateSubGroup", "-c", "DefaultCluster", "-g", group, *extra]], self.ns_addr)
        for out in outs:
            assert "success" in out, out

    def _argv(self, args: tuple[str, ...]) -> list[str]:
        return [sys.executable, str(CLIENT), self.endpoint, *args]

    def client(self, *args: str, timeout: float = 120, check: bool = True) -> jvm.Events:
        kw = {"env": self.env} if self.env else {}
        proc = self.host.run(self._argv(args), timeout=timeout, **kw)
        events = jvm.Events(jvm._parse_lines(proc.stdout))
        events.returncode, events.stderr = proc.returncode, proc.stderr
        if check:
            assert proc.returncode == 0, f"grpc_client {args} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        return events

    def start(self, *args: str) -> subprocess.Popen:
        """The client in the background (``--hold``): its JSON lines on ``.stdout``."""
        kw = {"env": self.env} if self.env else {}
        return self.host.popen(self._argv(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def wait_event(proc: subprocess.Popen, name: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    for line in proc.stdout:
        if f'"event": "{name}"' in line:
            return
        assert time.monotonic() < deadline, f"no {name} from the client"
    raise AssertionError(f"the client ended before {name}: {proc.stderr.read()[-2000:] if proc.stderr else ''}")


class Ahead:
    """Scenarios started ahead of the test that asserts them (module-scoped: a module's ``ahead`` fixture).

    A scenario that mostly waits on a server's timer (a retry policy's 30 s) runs in a thread from an
    earlier test of the same server set on, beside that test's own scenarios, instead of alone in its
    own test; the test that asserts it calls :meth:`result`, which starts it if nobody did, waits for
    it and raises what it raised. Each scenario has its own topic and group, as when run in its test."""

    def __init__(self) -> None:
        self._runs: dict[str, tuple[threading.Thread, list[BaseException]]] = {}

    def start(self, key: str, scenario) -> None:
        if key in self._runs:
            return
        errors: list[BaseException] = []

        def run() -> None:
            try:
                scenario()
            except BaseException as exc:  # raised by result()
                errors.append(exc)

        thread = threading.Thread(target=run, name=f"ahead-{key}", daemon=True)
        self._runs[key] = (thread, errors)
        thread.start()

    def result(self, key: str, scenario, timeout: float = 300) -> None:
        self.start(key, scenario)
        thread, errors = self._runs[key]
        thread.join(timeout)
        assert not thread.is_alive(), f"the scenario {key} started ahead did not end within {timeout} s"
        if errors:
            raise errors[0]

    def __enter__(self) -> "Ahead":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, timeout: float = 300) -> None:
        for thread, _ in self._runs.values():
            thread.join(timeout)


def wanted_later(request, fixture: str, test: str) -> bool:
    """Whether ``test`` of this module (its function name) will run in this session with ``fixture``."""
    return any(item.originalname == test and fixture in item.fixturenames for item in to_run(request))


# ---------------------------------------------------------------------- scenarios
def check_each_message_once(g: PyGrpc, topic: str, group: str) -> None:
    g.create_topic(topic)
    sent = g.client("produce", topic, "8").of("sent")
    assert len(sent) == 8
    got = g.client("receive", topic, group, "8", "20", "--linger", "3").of("received")
    counts = Counter(r["msgId"] for r in got)
    assert sorted(counts) == sorted(s["msgId"] for s in sent), got
    assert set(counts.values()) == {1}, counts
    assert {r["body"] for r in got} == {f"grpc-{i}" for i in range(8)}
    assert all(r["attempt"] == 1 and r["topic"] == topic for r in got)


def check_unacked_comes_back(g: PyGrpc, topic: str, group: str, between=None) -> None:
    """Two messages received and not acked come back, once each, as their second attempt;
    ``between(topic, group)`` runs after the first receive (a broker kill -9)."""
    g.create_topic(topic)
    sent = g.client("produce", topic, "2").of("sent")
    first = g.client("receive", topic, group, "2", "10", "--no-ack").of("received")
    assert sorted(r["msgId"] for r in first) == sorted(s["msgId"] for s in sent)
    if between is not None:
        between(topic, group)
    again = g.client("receive", topic, group, "2", "20", "--linger", "2").of("received")
    assert sorted(r["msgId"] for r in again) == sorted(s["msgId"] for s in sent), again
    assert all(r["attempt"] == 2 for r in again), again


def offsets_on_disk(store: Path, topic: str, group: str) -> dict[int, int]:
    """The group's offsets of ``topic`` in a broker's config/consumerOffset.json (what a kill -9 keeps)."""
    try:
        text = (store / "config" / "consumerOffset.json").read_text()
    except OSError:
        return {}
    m = re.search(re.escape(f'"{topic}@{group}"') + r"\s*:\s*\{([^}]*)\}", text)
    return {int(q): int(o) for q, o in re.findall(r"(\d+)\s*:\s*(-?\d+)", m.group(1))} if m else {}


def check_fifo_order(g: PyGrpc, topic: str, group: str) -> None:
    """A FIFO topic, an orderly group, one message group: a message not acked holds back the ones
    after it until it comes again (its second attempt); all are acked in the order sent."""
    g.create_topic_and_group(topic, ("-o", "true", "-a", "+message.type=FIFO"), group, "-o", "true")
    sent = g.client("produce", topic, "6", "g1").of("sent")
    assert len(sent) == 6
    got = g.client("receive", topic, group, "6", "10", "--skip", "grpc-2", "--linger", "2").of("received")
    acked = [r["body"] for r in got if r["acked"]]
    assert acked == [f"grpc-{i}" for i in range(6)], got
    again = [r for r in got if r["body"] == "grpc-2"]
    assert [r["attempt"] for r in again] == [1, 2], got


def check_transactions(g: PyGrpc, topic: str, group: str) -> None:
    """Commit delivers the half message, rollback drops it, and a half message left open is settled
    by the check-back over the Telemetry stream (the checker answers COMMIT): the consumer gets
    exactly the committed and the checked one."""
    g.create_topic(topic, "-a", "+message.type=TRANSACTION")
    committed = g.client("transaction", topic, "commit").of("sent")
    g.client("transaction", topic, "rollback")
    checked = g.client("transaction", topic, "check", timeout=150)
    assert [c["body"] for c in checked.of("checked")] == ["tx-check"], checked
    got = g.client("receive", topic, group, "2", "20", "--linger", "3").of("received")
    assert sorted(r["body"] for r in got) == ["tx-check", "tx-commit"], got
    assert {r["msgId"] for r in got if r["body"] == "tx-commit"} == {committed[0]["msgId"]}


def check_dead_letter_after_max_attempts(g: PyGrpc, topic: str, group: str) -> None:
    """A group with retryMaxTimes 0 gives the client max attempts 1: a message received and not
    acked is not delivered again but forwarded to %DLQ%group, where mqadmin finds it."""
    g.create_topic_and_group(topic, (), group, "-r", "0")
    sent = g.client("produce", topic, "1").of("sent")
    first = g.client("receive", topic, group, "1", "10", "--no-ack").of("received")
    assert [r["msgId"] for r in first] == [sent[0]["msgId"]]
    # once its invisible time (10 s) is past, the revived message is popped by this receiver and goes
    # to the DLQ instead of to it: the receiver gets nothing while mqadmin finds the message there
    receiver = g.start("receive", topic, group, "0", "10", "--wait", "50")
    try:
        deadline = time.monotonic() + 50
        while True:
            out = g.mqadmin("queryMsgByUniqueKey", "-i", sent[0]["msgId"], "-t", f"%DLQ%{group}")
            if f"%DLQ%{group}" in out and sent[0]["msgId"] in out:
                break
            assert time.monotonic() < deadline, out
            time.sleep(1)
        time.sleep(2)  # a delivery to the client would come with the forward, not later
    finally:
        receiver.kill()
        stdout, _ = receiver.communicate(timeout=10)
    assert '"received"' not in stdout, stdout


def check_fifo_push_consumer_forwards_to_dlq(g: PyGrpc, topic: str, group: str) -> None:
    """A FIFO PushConsumer (orderly group, retryMaxTimes 1: max attempts 2) whose listener fails one
    message: the client consumes it twice, forwards it to %DLQ%group (ForwardMessageToDeadLetterQueue),
    and goes on with the rest of the message group in order."""
    g.create_topic_and_group(topic, ("-o", "true", "-a", "+message.type=FIFO"), group, "-o", "true", "-r", "1")
    sent = g.client("produce", topic, "4", "g1").of("sent")
    got = g.client("push", topic, group, "3", "--fail", "grpc-1").of("consumed")
    assert [(r["body"], r["result"]) for r in got] == [
        ("grpc-0", "SUCCESS"), ("grpc-1", "FAILURE"), ("grpc-1", "FAILURE"), ("grpc-2", "SUCCESS"),
        ("grpc-3", "SUCCESS")], got
    out = g.mqadmin("queryMsgByUniqueKey", "-i", sent[1]["msgId"], "-t", f"%DLQ%{group}")
    assert f"%DLQ%{group}" in out and sent[1]["msgId"] in out, out


def check_delay(g: PyGrpc, topic: str, group: str, delay_s: int = 10) -> None:
    """Messages with a delivery timestamp (a DELAY topic) reach a consumer that waits for them at
    that time: not before it (the broker's timer precision, 1 s, aside), and soon after it."""
    g.create_topic(topic, "-a", "+message.type=DELAY")
    sent = g.client("produce", topic, "3", "--delay-s", str(delay_s)).of("sent")
    assert len(sent) == 3 and all("deliverAt" in s for s in sent), sent
    got = g.client("receive", topic, group, "3", "20", "--wait", "60").of("received")
    due = {s["msgId"]: s["deliverAt"] for s in sent}
    assert sorted(r["msgId"] for r in got) == sorted(due), got
    early = [(r["body"], round(due[r["msgId"]] - r["at"], 2)) for r in got if r["at"] < due[r["msgId"]] - 1.0]
    late = [(r["body"], round(r["at"] - due[r["msgId"]], 2)) for r in got if r["at"] > due[r["msgId"]] + 15]
    print(f"{topic}: received {sorted(round(r['at'] - due[r['msgId']], 2) for r in got)} s after the delivery time")
    assert not early and not late, f"seconds early {early}, seconds late {late}"


# a group's retry policy that the default (1 s, then 5 s) cannot pass for: 30 s, then 2 s
BACKOFF_POLICY = '{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[30000,2000]}}'


def check_retry_backoff_from_group_policy(g: PyGrpc, topic: str, group: str) -> None:
    """A PushConsumer whose listener fails a message twice: it comes again after the first delay of
    the group's retry policy (mqadmin updateSubGroup -p, which the client gets in its settings) and
    sooner the next time (the second delay); the third attempt succeeds (retryMaxTimes 2: max
    attempts 3). Each delay is a lower bound only: a revived message waits for the broker's revive
    scan (rmqpy: 2 to 3 s more), and the Java 5.3.3 broker wakes no pop polling for it (the client
    gets it with its next receive, up to the 20 s long polling later)."""
    g.create_topic_and_group(topic, (), group, "-r", "2", "-p", BACKOFF_POLICY)
    g.client("produce", topic, "1")
    got = g.client("push", topic, group, "1", "--fail", "grpc-0", "--fail-times", "2", "--wait", "130",
                   timeout=170).of("consumed")
    assert [(r["attempt"], r["result"]) for r in got] == [(1, "FAILURE"), (2, "FAILURE"), (3, "SUCCESS")], got
    first, second = got[1]["at"] - got[0]["at"], got[2]["at"] - got[1]["at"]
    print(f"{topic}: came again after {first:.2f} s, then after {second:.2f} s")
    assert first >= 29.5 and second < first, f"came again after {first:.1f} s, then after {second:.1f} s"
