"""rmqpy.client (the Python remoting client, docs/client.md) against rmqpy's broker and the real Java
4.9.8 and 5.3.3 brokers, checked by the official Java clients and mqadmin.

For each target (a name server and a broker: rmqpy's, or Apache's jars) the library's sends are
consumed by the official Java push consumer byte for byte (body, tags, keys, properties, ids),
what the official Java producer sent is pulled by the library identically, the offsets the library
commits are what ``mqadmin consumerProgress`` shows, and a sync send retries on the other broker
when one broker of the route has been killed. The library runs in the test process and reaches the
servers at the client host's ``host_ip``; the Java clients run on the client host.
"""
from __future__ import annotations

import base64
import re
import uuid
from pathlib import Path

import pytest

from rmqpy.client import ClientError, Message, MessageQueue, Producer, PullConsumer, PullStatus
from rmqpy.client.core import Call
from tests.fresh_reactor import run_in_fresh_reactor
from tests.interop import clients, jvm, servers
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

TARGETS = ["rmqpy", "4.9.8", "5.3.3"]
#: properties the broker or the Java consumer adds on the way (not the sender's)
ADDED_ON_THE_WAY = {"MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME", "CLUSTER", "TRACE_ON", "MSG_REGION"}


class Target:
    def __init__(self, name: str, host, tmp: Path) -> None:
        self.name, self.host, self.tmp = name, host, tmp
        #: the Java client version that checks this target (rmqpy: the newer one)
        self.version = "5.3.3" if name == "rmqpy" else name
        self.ip = host.host_ip
        if name == "rmqpy":
            self.cluster = servers.Cluster(tmp, self.ip)
            self.broker_name = "broker-py"
        else:
            self.java = jvm.JavaCluster(name, tmp, self.ip, {})
            self.broker_name = "broker-a"
        c = self.cluster if name == "rmqpy" else self.java
        self.ns_addr, self.broker_addr = c.ns_addr, c.broker_addr

    def close(self) -> None:
        if self.name == "rmqpy":
            self.cluster.close()
        else:
            self.java.close(clean=False)

    def uniq(self, prefix: str) -> str:
        return f"{prefix}_{self.name.replace('.', '')}_{uuid.uuid4().hex[:6]}"

    def harness(self, *args: str, timeout: float = 60) -> jvm.Events:
        return clients.harness(self.host, self.version, [args[0], "-n", self.ns_addr, *args[1:]], timeout=timeout,
                               check=False)


@pytest.fixture(scope="module", params=TARGETS)
def target(request, java_built, client_host, tmp_path_factory):
    t = Target(request.param, client_host, tmp_path_factory.mktemp(f"pyclient-{request.param}"))
    try:
        yield t
    finally:
        t.close()


def _routed(target: Target, topic: str, broker_addr: str | None = None) -> None:
    """Wait until the name server routes ``topic`` (a broker registers a topic it auto-created
    shortly after the first send; until then consumers cannot find its queues, also in Java)."""
    assert jvm.wait_broker_registered(target.ns_addr, broker_addr or target.broker_addr, topic, 30), topic


def _stored(target: Target, topic: str, count: int, brokers: set[str] | None = None) -> None:
    """Wait until the consume queues of ``topic`` hold ``count`` messages: a Java broker answers a
    send once the commit log has it and fills the consume queues a moment later (ReputMessageService),
    so a pull right after the send may not see it yet."""
    with PullConsumer(target.ns_addr, group="GPyWait") as consumer:
        queues = [mq for mq in consumer.fetch_queues(topic) if brokers is None or mq.broker_name in brokers]
        wait_until(lambda: sum(consumer.max_offset(mq) for mq in queues) >= count, 10, 0.05,
                   what=f"{count} messages in the consume queues of {topic}")


def _body(event: dict) -> bytes:
    if event.get("bodyBase64") is not None:
        return base64.b64decode(event["bodyBase64"])
    return str(event["body"]).encode("utf-8")


def _pull_all(consumer: PullConsumer, topic: str, sub: str = "*") -> list:
    got = []
    for mq in consumer.fetch_queues(topic):
        offset = consumer.min_offset(mq)
        while True:
            res = consumer.pull(mq, offset, 32, sub)
            got += res.messages
            if res.status not in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG) or res.next_begin_offset == offset:
                break
            offset = res.next_begin_offset
    return got


def test_library_sends_reach_the_java_push_consumer_byte_identical(target: Target) -> None:
    topic = target.uniq("TPyOut")
    binary = bytes(range(256)) * 3                                   # not UTF-8: base64 in the events
    big = b"".join(i.to_bytes(2, "big") for i in range(3000))       # 6000 bytes: sent zlib-compressed
    singles = [Message(topic, f"sync-{i}".encode(), tags="TagA", keys=[f"k{i}", "shared"],
                       properties={"seq": str(i), "text": "grüße 漢字 ✓"}) for i in range(3)]
    singles += [Message(topic, binary, tags="bin", flag=7), Message(topic, big, tags="big", keys="bigkey")]
    batch = [Message(topic, f"batch-{i}".encode(), tags="TagB", properties={"b": str(i)}) for i in range(3)]
    oneway = Message(topic, b"oneway", tags="one", keys="ow")
    with Producer(target.ns_addr, group=target.uniq("PGOut")) as producer:   # a new topic: TBW102's route
        results = [producer.send(m) for m in singles]
        batch_result = producer.send_batch(batch)
        producer.send_oneway(oneway, queue=results[0].queue)
    assert all(r.status == "SEND_OK" and r.queue.broker_name == target.broker_name for r in results)
    batch_ids = batch_result.msg_id.split(",")
    assert len(batch_ids) == 3 and len(batch_result.offset_msg_id.split(",")) == 3
    sent = {m.body: (m, r.msg_id) for m, r in zip(singles, results)}
    sent.update({m.body: (m, i) for m, i in zip(batch, batch_ids)})
    sent[oneway.body] = (oneway, None)

    ev = target.harness("consume-push", "-t", topic, "-g", target.uniq("GPyOut"), "-c", str(len(sent)),
                        "--from", "first", "--max-body-print", "10000", "--timeout-ms", "30000")
    assert ev.returncode == 0, (ev.errors, ev.stderr[-2000:])
    received = {_body(e): e for e in ev.of("received")}
    assert set(received) == set(sent)
    for body, (msg, msg_id) in sent.items():
        e = received[body]
        assert e["bodyLen"] == len(body) and e["topic"] == topic
        assert e["tags"] == msg.tags and e["keys"] == msg.key_string() and e["flag"] == msg.flag
        props = {k: v for k, v in e["properties"].items() if k not in ADDED_ON_THE_WAY}
        assert props.pop("WAIT", "true") == "true"     # the 5.x broker (and rmqpy) store it without WAIT
        expected = dict(msg.properties, UNIQ_KEY=props["UNIQ_KEY"])
        expected.update({"TAGS": msg.tags} if msg.tags else {})
        expected.update({"KEYS": msg.key_string()} if msg.keys else {})
        assert props == expected
        if msg_id is not None:
            assert e["msgId"] == msg_id
    assert received[big]["storeSize"] < len(big)    # stored zlib-compressed, inflated by the consumer


def _java_body(template: str, size: int, i: int) -> bytes:
    """The harness' Common.body: the expanded template, padded with a letter pattern to ``size``."""
    head = template.replace("{i}", str(i)).encode()
    if size < 0:
        return head
    return head[:size] + bytes(ord("a") + ((k + i) % 26) for k in range(len(head[:size]), size))


def test_java_producer_messages_are_pulled_identically(target: Target) -> None:
    topic = target.uniq("TPyIn")
    small = target.harness("produce", "-t", topic, "-c", "6", "--tags", "A,B", "--keys", "key-{i}",
                           "--body", "java-{i}", "--prop", "p=v{i}", "--prop", "u=ünï-{i}", "--flag", "3")
    assert small.returncode == 0 and len(small.of("sent")) == 6, (small.errors, small.stderr[-2000:])
    large = target.harness("produce", "-t", topic, "-c", "1", "--tags", "C", "--body", "big-{i}",
                           "--body-size", "6000")      # over compressMsgBodyOverHowmuch: compressed
    assert large.returncode == 0, (large.errors, large.stderr[-2000:])
    sent = {e["msgId"]: (e, _java_body("java-{i}", -1, e["i"])) for e in small.of("sent")}
    sent.update({e["msgId"]: (e, _java_body("big-{i}", 6000, e["i"])) for e in large.of("sent")})

    with PullConsumer(target.ns_addr, group=target.uniq("GPyIn")) as consumer:
        pulled = _pull_all(consumer, topic)
        only_a = _pull_all(consumer, topic, "A")
    assert sorted(m.uniq_key for m in pulled) == sorted(sent)
    for m in pulled:
        event, body = sent[m.uniq_key]
        assert m.body == body and m.topic == topic and m.tags == event["tags"] and m.keys == event["keys"]
        assert m.queue_id == event["queueId"] and m.queue_offset == event["queueOffset"]
        assert m.msg_id == event["offsetMsgId"]
        if body.startswith(b"java-"):
            assert m.flag == 3 and m.properties["p"] == f"v{event['i']}" and m.properties["u"] == f"ünï-{event['i']}"
    assert sorted(m.uniq_key for m in only_a) == sorted(k for k, (e, _) in sent.items() if e["tags"] == "A")


def _progress(text: str, topic: str) -> dict[int, tuple[int, int]]:
    """consumerProgress rows of ``topic``: queue id -> (broker offset, consumer offset)."""
    rows = {}
    for line in text.splitlines():
        cols = line.split()
        if len(cols) >= 5 and cols[0] == topic and cols[2].isdigit():
            rows[int(cols[2])] = (int(cols[3]), int(cols[4]))
    return rows


def test_committed_offsets_are_what_mqadmin_consumer_progress_shows(target: Target) -> None:
    topic, group = target.uniq("TPyOff"), target.uniq("GPyOff")
    with Producer(target.ns_addr) as producer:
        for i in range(12):
            producer.send(Message(topic, f"m{i}".encode()))
    _routed(target, topic)
    _stored(target, topic, 12)
    with PullConsumer(target.ns_addr, group=group) as consumer:
        queues = [mq for mq in consumer.fetch_queues(topic) if consumer.max_offset(mq) > 0]
        assert len(queues) >= 2
        assert all(consumer.query_offset(mq) in (-1, 0) for mq in queues)   # 4.9 and rmqpy say 0 for new groups
        committed = {}
        for n, mq in enumerate(queues):
            committed[mq.queue_id] = min(n + 1, consumer.max_offset(mq))
            consumer.commit_offset(mq, committed[mq.queue_id])
        assert {mq.queue_id: consumer.query_offset(mq) for mq in queues} == committed
        maxes = {mq.queue_id: consumer.max_offset(mq) for mq in queues}
    out = clients.mqadmin(target.host, target.version, ["consumerProgress", "-g", group], target.ns_addr)
    rows = _progress(out, topic)
    assert {q: c for q, (_b, c) in rows.items()} == committed, out
    assert {q: b for q, (b, _c) in rows.items()} == maxes, out


def test_sync_send_retries_on_the_other_broker_when_one_is_killed(target: Target) -> None:
    """A second (rmqpy) broker joins the name server; the producer learns the route, the broker is
    killed -9, and every send still succeeds once, on the surviving broker, within the retries."""
    extra = servers.start_broker(target.tmp / "broker-x", target.ns_addr, host=target.ip,
                                 props={"brokerName": "broker-x"})
    try:
        assert jvm.wait_broker_registered(target.ns_addr, extra.addr, "TBW102", 30)
        topic = target.uniq("TPyKill")
        producer = Producer(target.ns_addr, group=target.uniq("PGKill"), retries=2)
        for broker in (target.broker_name, "broker-x"):   # the topic on both brokers
            producer.send(Message(topic, f"warm-{broker}".encode()), queue=MessageQueue(topic, broker, 0))
        queues = producer.fetch_publish_queues(topic)
        assert {mq.broker_name for mq in queues} == {target.broker_name, "broker-x"}
        calls: list[Call] = []
        invoke = producer._transport.invoke

        def spy(call: Call):
            calls.append(call)
            return invoke(call)
        _routed(target, topic)
        _routed(target, topic, extra.addr)
        producer._transport.invoke = spy    # type: ignore[method-assign]
        extra.kill9()
        results = [producer.send(Message(topic, f"after-{i}".encode())) for i in range(8)]
        producer.shutdown()
        assert {r.queue.broker_name for r in results} == {target.broker_name}
        assert any(c.addr == extra.addr for c in calls), "no send was tried on the killed broker"
        _stored(target, topic, 9, {target.broker_name})
        with PullConsumer(target.ns_addr, group=target.uniq("GPyKill")) as consumer:
            mine = [MessageQueue(topic, target.broker_name, q) for q in range(8)]
            bodies = []
            for mq in mine:
                try:
                    bodies += [m.body for m in consumer.pull(mq, 0, 32).messages]
                except ClientError:
                    pass        # fewer queues on this broker
        after = sorted(b for b in bodies if b.startswith(b"after-"))
        assert after == sorted(f"after-{i}".encode() for i in range(8))   # each once
    finally:
        extra.kill9()


def test_errors_are_client_errors_with_the_broker_code(target: Target) -> None:
    with PullConsumer(target.ns_addr, group=target.uniq("GErr"), timeout_ms=2000) as consumer:
        with pytest.raises(ClientError, match="do not know"):
            consumer.fetch_queues(target.uniq("TNever"))
    with Producer(target.ns_addr) as producer:
        with pytest.raises(ClientError, match="length is zero"):
            producer.send(Message(target.uniq("T"), b""))
        r = producer.send(Message(target.uniq("TErr"), b"x"))
        with pytest.raises(ClientError) as err:    # queue 99 does not exist on the broker
            producer.send(Message(r.queue.topic, b"y"), queue=MessageQueue(r.queue.topic, r.queue.broker_name, 99))
        assert err.value.code is not None
    assert re.search(r"CODE: \d+", str(err.value))


def test_twisted_and_asyncio_forms_send_and_pull_concurrently(target: Target) -> None:
    """The Deferred and asyncio forms (same plans, other transports): concurrent sends, pulls and
    offsets; everything sent lands once, as the blocking consumer sees."""
    import asyncio

    from twisted.internet import defer, threads

    from rmqpy.client import aio, deferred
    topic, group = target.uniq("TPyForms"), target.uniq("GPyForms")

    async def with_asyncio() -> tuple[list, list]:
        async with aio.Producer(target.ns_addr, group=group) as producer:
            sent = await asyncio.gather(*[producer.send(Message(topic, f"aio-{i}".encode(), tags="aio"))
                                          for i in range(6)])
        await asyncio.get_running_loop().run_in_executor(None, _stored, target, topic, 7)
        async with aio.PullConsumer(target.ns_addr, group=group) as consumer:
            got = []
            for mq in await consumer.fetch_queues(topic):
                res = await consumer.pull(mq, await consumer.min_offset(mq), 32, "aio")
                got += [m.body for m in res.messages]
                await consumer.commit_offset(mq, res.next_begin_offset)
                assert await consumer.query_offset(mq) == res.next_begin_offset == await consumer.max_offset(mq)
        return sent, got

    async def with_twisted(reactor) -> tuple[list, list]:
        producer = deferred.Producer(reactor, target.ns_addr, group=group)
        sent = await defer.gatherResults([producer.send(Message(topic, f"tx-{i}".encode(), tags="tx"))
                                          for i in range(6)])
        producer.shutdown()
        await threads.deferToThreadPool(reactor, reactor.getThreadPool(), _stored, target, topic, 13)
        consumer = deferred.PullConsumer(reactor, target.ns_addr, group=group + "_tx")
        got = []
        for mq in await consumer.fetch_queues(topic):
            res = await consumer.pull(mq, 0, 32, "tx")
            got += [m.body for m in res.messages]
        await consumer.shutdown()
        return sent, got

    async def produce_first() -> None:     # the topic, routed before the consumers look for it
        async with aio.Producer(target.ns_addr, group=group) as producer:
            await producer.send(Message(topic, b"first", tags="first"))
    asyncio.run(produce_first())
    _routed(target, topic)
    aio_sent, aio_got = asyncio.run(with_asyncio())
    tx_sent, tx_got = run_in_fresh_reactor(with_twisted, timeout=60.0)
    assert sorted(aio_got) == sorted(f"aio-{i}".encode() for i in range(6))
    assert sorted(tx_got) == sorted(f"tx-{i}".encode() for i in range(6))
    assert len({r.msg_id for r in aio_sent + tx_sent}) == 12
    with PullConsumer(target.ns_addr, group=target.uniq("GPyAll")) as consumer:
        assert len(_pull_all(consumer, topic)) == 13


def test_the_examples_of_docs_client_md_run(client_host, tmp_path) -> None:
    """Every python block of docs/client.md and README's rmqpy.client one, run as written against an
    rmqpy name server and broker."""
    import os
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[2]
    blocks = re.findall(r"```python\n(.*?)```", (root / "docs" / "client.md").read_text(), re.S)
    assert len(blocks) >= 5
    blocks += [b for b in re.findall(r"```python\n(.*?)```", (root / "README.md").read_text(), re.S)
               if "rmqpy.client" in b]
    assert len(blocks) >= 6
    with servers.Cluster(tmp_path, client_host.host_ip) as c:
        for block in blocks:
            proc = subprocess.run([sys.executable, "-c", block.replace("127.0.0.1:9876", c.ns_addr)],
                                  env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True, text=True,
                                  timeout=60)
            assert proc.returncode == 0, f"{block}\n{proc.stdout}\n{proc.stderr}"


@pytest.fixture(scope="module", params=["rmqpy", "4.9.8"])
def acl_target(request, java_built, client_host, tmp_path_factory):
    """A broker with plain ACL (aclEnable=true) and test_acl_java's plain_acl.yml: rmqpy's or the
    Java 4.9.8 broker (5.3.3 does not enforce plain ACL any more)."""
    from tests.interop.test_acl_java import write_home
    tmp = tmp_path_factory.mktemp(f"pyclient-acl-{request.param}")
    if request.param == "rmqpy":
        home = write_home(tmp / "home", client_host.client_ip)
        with servers.Cluster(tmp, client_host.host_ip, {"aclEnable": True, "rocketmqHome": home}) as c:
            yield c
    else:
        write_home(tmp / "java-broker", client_host.client_ip)
        c = jvm.JavaCluster("4.9.8", tmp, client_host.host_ip, {"aclEnable": True})
        try:
            yield c
        finally:
            c.close(clean=False)


def _routed_to(ns: str, topic: str, broker_name: str) -> bool:
    """Whether the name server's route of ``topic`` (GET_ROUTEINFO_BY_TOPIC) names ``broker_name``."""
    code, _, _, body = jvm.remoting_request(ns, 105, {"topic": topic})
    return code == 0 and f'"{broker_name}"'.encode() in (body or b"")


def test_credentials_sign_requests_the_acl_broker_accepts(acl_target) -> None:
    """Signed with the user's keys: send and pull where plain_acl.yml allows them; the denied
    topic, a wrong secret and no credentials are refused with the broker's code."""
    from tests.interop.test_acl_java import USER, USER_SK
    ns = acl_target.ns_addr
    user = (USER, USER_SK)
    topic = "topicPub"    # defaultTopicPerm DENY: only the topics named in plain_acl.yml
    with Producer(ns, credentials=user, retries=0) as producer:
        sent = producer.send(Message(topic, b"signed", tags="acl"))
        with pytest.raises(ClientError) as denied:
            producer.send(Message("topicDeny", b"x"), queue=MessageQueue("topicDeny", sent.queue.broker_name, 0))
    assert denied.value.code == 1 and "No default permission for topic:topicDeny" in denied.value.message
    # the send made topicPub, and a Java 4.9.8 broker tells its name server of a topic made by a send with
    # a oneway registration (TopicConfigManager.createTopicInSendMessageMethod): a route asked at once can
    # come before it (the consumer's "broker not exist in the route"); wait for it, as a later consumer
    assert wait_until(lambda: _routed_to(ns, topic, sent.queue.broker_name), 10, 0.1), f"{topic} not routed"
    with PullConsumer(ns, group="groupOk", credentials=user) as consumer:
        res = consumer.pull(sent.queue, sent.queue_offset)
        assert [m.body for m in res.messages][:1] == [b"signed"]
    for credentials, why in [((USER, "wrongsecret"), "Check signature failed"), (None, "No accessKey is configured")]:
        with Producer(ns, credentials=credentials, retries=0) as producer:
            with pytest.raises(ClientError) as refused:
                producer.send(Message(topic, b"x"), queue=sent.queue)
            assert refused.value.code == 1 and why in refused.value.message   # the same from both brokers
