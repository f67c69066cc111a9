"""mqadmin against rmqpy and against the real Java broker, side by side: the same answers.

Two clusters, each with its own name server: ours (``twistd rmq-namesrv`` + ``rmq-broker``) and
Java's (NamesrvStartup + BrokerStartup of the same version family). Both brokers are named
alike. The same setup runs on both (updateTopic, updateSubGroup, produce with keys, consume),
then the same mqadmin commands, whose outputs are compared after replacing what legitimately
differs: addresses, dates and timestamps, message ids, commit-log positions, rates.
"""
from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rmqpy.client.model import MessageQueue
from rmqpy.client.requests import pull_request, subscription
from rmqpy.protocol.codes import RequestCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import SendMessageRequestHeaderV2
from rmqpy.protocol.message import decode_records, encode_batch_body, properties_to_string
from rmqpy.tools.blocking_client import BlockingClient
from tests.interop import clients, jvm, servers
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

BROKER = "parity-b"
TOPIC, GROUP, CLONE = "ParityT", "parity_g", "parity_g2"
N_MSGS = 4


class Side:
    """One cluster (ours or Java's) and the client host that runs mqadmin and the harness."""

    def __init__(self, name: str, version: str, host, ns_addr: str, broker_addr: str, stop) -> None:
        self.name, self.version, self.host = name, version, host
        self.ns_addr, self.broker_addr, self._stop = ns_addr, broker_addr, stop

    def admin(self, *args: str) -> str:
        return clients.mqadmin(self.host, self.version, args, self.ns_addr)

    def harness(self, *args: str, timeout: float = 90):
        extra = ["--poll-namesrv-ms", "1000"] if args[0].startswith("consume") else []
        return clients.harness(self.host, self.version, [args[0], "-n", self.ns_addr, *extra, *args[1:]],
                               timeout=timeout)

    def close(self) -> None:
        self._stop()


def _ours(version: str, host, tmp: Path) -> Side:
    c = servers.Cluster(tmp, host.host_ip, {"brokerName": BROKER})
    side = Side("rmqpy", version, host, c.ns_addr, c.broker_addr, c.close)
    side.server = c.broker  # type: ignore[attr-defined]
    return side


def _java(version: str, host, tmp: Path) -> Side:
    c = jvm.JavaCluster(version, tmp, host.host_ip, {"brokerName": BROKER})
    # killed at the end: nothing reads its store afterwards, and a clean 5.3.3 shutdown takes ~13 s
    side = Side("java", version, host, c.ns_addr, c.broker_addr, lambda: c.close(clean=False))
    side.server = c.broker  # type: ignore[attr-defined]
    return side


def _setup(side: Side) -> dict:
    out = {}
    out["updateTopic"] = side.admin("updateTopic", "-b", side.broker_addr, "-t", TOPIC, "-r", "2", "-w", "2")
    out["updateSubGroup"] = side.admin("updateSubGroup", "-b", side.broker_addr, "-g", GROUP)
    assert wait_until(lambda: TOPIC in side.admin("topicList"), 30.0, 1.0), f"{side.name}: topic not routed"
    sent = side.harness("produce", "--topic", TOPIC, "--count", str(N_MSGS), "--keys", "key{i}",
                        "--queue-mod", "2", "--body", "b{i}")
    assert len(sent.of("sent")) == N_MSGS, sent
    got = side.harness("consume-push", "--topic", TOPIC, "--group", GROUP, "--count", str(N_MSGS),
                       "--from", "first", "--linger-ms", "3000", "--timeout-ms", "40000", timeout=120)
    assert len(got.of("received")) >= N_MSGS, got
    # the consumer has exited: its offsets are persisted once the broker has them
    assert wait_until(lambda: re.search(r"Diff Total:\s*0\b", side.admin("consumerProgress", "-g", GROUP)), 60, 1.0), \
        side.admin("consumerProgress", "-g", GROUP)
    return out


@pytest.fixture(scope="module", params=["5.3.3"])  # 4.9.7 server + 4.9.8 mqadmin: not run yet
def pair(request, java_built, client_host, tmp_path_factory):
    version = request.param
    tmp = tmp_path_factory.mktemp(f"parity-{version}")
    started: dict[str, Side] = {}

    def start_and_set_up(make, name: str) -> tuple[Side, dict]:
        side = make(version, client_host, tmp / name)
        started[side.name] = side
        return side, _setup(side)

    try:
        # the two clusters share nothing: each starts and is set up while the other one is (most
        # of a setup is waiting: the 5.3.3 broker's first registration, the consumer's linger)
        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(start_and_set_up, _ours, "ours"), pool.submit(start_and_set_up, _java, "java")]
            (ours, ours_setup), (java, java_setup) = (f.result() for f in futures)
        yield ours, java, {ours.name: ours_setup, java.name: java_setup}
    finally:
        if "java" in started:
            started["java"].close()
        if "rmqpy" in started:
            started["rmqpy"].close()
            print(started["rmqpy"].server.log_tail(3000))  # type: ignore[attr-defined]


# ---------------------------------------------------------------------- normalisation
_SUBS = [
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}:\d+\b"), "<ADDR>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[ #T]\d{2}:\d{2}:\d{2}(?:[,.:]\d{3})?\b"), "<DATE>"),
    (re.compile(r"\b[A-Z][a-z]{2} [A-Z][a-z]{2} \d{2} \d{2}:\d{2}:\d{2} \w+ \d{4}\b"), "<DATE>"),
    (re.compile(r"\b[0-9A-F]{32}(?:[0-9A-F]{24})?\b"), "<MSGID>"),
    (re.compile(r"\b1[6-9]\d{11}\b"), "<TS>"),
]


def norm(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if line.startswith("RocketMQLog:") or "SLF4J" in line or not line.strip():
            continue
        for rx, rep in _SUBS:
            line = rx.sub(rep, line)
        lines.append(re.sub(r"[ \t]+", " ", line.rstrip()))
    return "\n".join(lines)


def both(pair, *args: str, fill_broker: bool = False) -> tuple[str, str]:
    ours, java, _ = pair
    outs = []
    for side in (ours, java):
        argv = [a.replace("{broker}", side.broker_addr) for a in args]
        outs.append(side.admin(*argv))
    return outs[0], outs[1]


def assert_same(ours: str, java: str, transform=norm) -> None:
    a, b = transform(ours), transform(java)
    assert a == b, f"rmqpy:\n{a}\n---- java:\n{b}"


# ---------------------------------------------------------------------- the commands
def test_setup_commands_answer_alike(pair) -> None:
    _, _, setups = pair
    for cmd in ("updateTopic", "updateSubGroup"):
        assert_same(setups["rmqpy"][cmd], setups["java"][cmd])


def test_topic_status(pair) -> None:
    assert_same(*both(pair, "topicStatus", "-t", TOPIC))


def test_topic_route(pair) -> None:
    assert_same(*both(pair, "topicRoute", "-t", TOPIC))


def _rates(text: str) -> str:
    """Rates and 24 h counts depend on when the 10 s sampling ran: compare them as present."""
    text = norm(text)
    text = re.sub(r"(Consume TPS:)\s*[\d.]+", r"\1 <TPS>", text)
    return text


# No '%RETRY%parity_g' row on either broker: both answer the 5.3.3 client's QUERY_CONSUMER_OFFSET for the
# never-used retry queue with QUERY_NOT_FOUND, so the client starts it at 0 without keeping an offset and
# commits none. rmqpy answered 0 there (as it does for other never-used queues, docs/compatibility.md), and
# the row then appeared whenever the consumer had rebalanced the retry queue before it shut down (under load).
def test_consumer_progress(pair) -> None:
    assert_same(*both(pair, "consumerProgress", "-g", GROUP), transform=_rates)


def test_broker_consume_stats(pair) -> None:
    ours, java = both(pair, "brokerConsumeStats", "-b", "{broker}")
    # rows come in the order of the broker's group table (a HashMap in Java): compare them sorted
    assert sorted(norm(ours).splitlines()) == sorted(norm(java).splitlines()), f"rmqpy:\n{ours}\njava:\n{java}"
    assert GROUP in ours and re.search(r"Diff Total:\s*0\b", ours)


def _cq(text: str) -> str:
    # a message's commit-log position and size depend on the bytes of what came before it
    # (born/store hosts, msgId properties): compare the rest
    text = norm(text)
    text = re.sub(r"physicOffset=\d+", "physicOffset=<N>", text)
    return re.sub(r"physicSize=\d+", "physicSize=<N>", text)


def test_query_cq(pair) -> None:
    ours, java = both(pair, "queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-c", "10")
    assert_same(ours, java, transform=_cq)
    assert ours.count("idx: ") == N_MSGS // 2, ours
    ours, java = both(pair, "queryCq", "-t", TOPIC, "-q", "1", "-i", "0", "-c", "1", "-g", GROUP)
    assert_same(ours, java, transform=_cq)


def test_query_msg_by_key(pair) -> None:
    ours, java = both(pair, "queryMsgByKey", "-t", TOPIC, "-k", "key1")
    assert_same(ours, java)
    assert "<MSGID>" in norm(ours)


def _msg_detail(text: str) -> str:
    text = norm(text)
    # commit-log offsets and the body CRC follow the message bytes; the client's process/instance
    # properties (UNIQ_KEY...) are replaced by <MSGID> already
    text = re.sub(r"(Commit Log Offset:|Physical Offset:)\s*\d+", r"\1 <N>", text)
    text = re.sub(r"(Body CRC:|Store Size:)\s*-?\d+", r"\1 <N>", text)
    return text


@pytest.mark.xfail(strict=False, reason="the Properties line matches since rmqpy stores a 5.x client's message as "
                   "5.3.3 does (issue 12); Java 5.3.3 prints one more MessageTrack, for a 'consumer group' named "
                   "like the topic (ParityT, route of %RETRY%ParityT not found): not investigated yet")
def test_query_msg_by_offset(pair) -> None:
    ours, java = both(pair, "queryMsgByOffset", "-t", TOPIC, "-b", BROKER, "-i", "0", "-o", "0")
    assert_same(ours, java, transform=_msg_detail)
    assert f"Topic: {TOPIC}" in ours.replace("  ", " ") or TOPIC in ours


# keys whose defaults 4.9 and 5.3.3 share (transactionCheckInterval: 60000 in 4.9, 30000 in 5.x)
COMMON_CONFIG_KEYS = ("brokerClusterName", "brokerName", "brokerId", "brokerPermission", "brokerRole",
                      "flushDiskType", "autoCreateSubscriptionGroup", "defaultTopicQueueNums", "deleteWhen",
                      "fileReservedTime", "maxMessageSize", "messageDelayLevel", "traceTopicEnable",
                      "msgTraceTopicName", "longPollingEnable", "slaveReadEnable", "mappedFileSizeConsumeQueue",
                      "flushConsumerOffsetInterval", "transactionTimeOut", "transactionCheckMax",
                      "notifyConsumerIdsChangedEnable", "enablePropertyFilter",
                      "messageIndexEnable", "maxHashSlotNum", "maxIndexNum")


def _config(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(\w+)\s*=\s*(.*?)\s*$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def test_get_and_update_broker_config(pair) -> None:
    ours_s, java_s, _ = pair
    ours, java = (_config(t) for t in both(pair, "getBrokerConfig", "-b", "{broker}"))
    assert ours and java, (ours, java)
    keys = [k for k in COMMON_CONFIG_KEYS if k in java]
    # the stores' sizes were chosen by each test harness; the rest must agree
    sized = {"mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum", "messageDelayLevel"}
    differ = {k: (ours.get(k), java[k]) for k in keys if k not in sized and ours.get(k) != java[k]}
    assert not differ, differ
    both(pair, "updateBrokerConfig", "-b", "{broker}", "-k", "fileReservedTime", "-v", "7")
    ours, java = (_config(t) for t in both(pair, "getBrokerConfig", "-b", "{broker}"))
    assert ours["fileReservedTime"] == java["fileReservedTime"] == "7"
    # Java wrote it back to its -c file; so did we (it survives a restart)
    java_conf = Path(java_s.server.config).read_text()  # type: ignore[attr-defined]
    ours_conf = (Path(ours_s.server.workdir) / "broker.conf").read_text()  # type: ignore[attr-defined]
    assert "fileReservedTime=7" in java_conf and "fileReservedTime=7" in ours_conf


def test_clone_group_offset_then_progress(pair) -> None:
    # 5.3.3 mqadmin clones with UPDATE_CONSUMER_OFFSET per queue, which the 5.3.3 broker refuses for a
    # group it does not have (SUBSCRIPTION_GROUP_NOT_EXIST); 4.9 (and rmqpy) accept it: create it first
    both(pair, "updateSubGroup", "-b", "{broker}", "-g", CLONE)
    ours, java = both(pair, "cloneGroupOffset", "-s", GROUP, "-d", CLONE, "-t", TOPIC, "-o", "true")
    assert_same(ours, java)
    assert "clone group offset success" in ours, ours
    # consumerProgress of the clone (both brokers print the same; with no consumer online 5.3.3 mqadmin
    # may print nothing for it)
    ours, java = both(pair, "consumerProgress", "-g", CLONE)
    assert_same(ours, java, transform=_rates)


def _stats_all(text: str) -> list[tuple[str, ...]]:
    """statsAll rows: topic, group and accumulation exactly; TPS and 24 h counts as numbers."""
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#") or parts[0] != TOPIC:
            continue
        rows.append(tuple(parts[:3]))
        for value in parts[3:]:
            assert re.fullmatch(r"[\d.]+|NO_CONSUMER", value), line
    return sorted(rows)


# The Java 5.3.3 broker lists one more "consumer group" for the topic: one named like the topic itself,
# accumulation = every message of the topic. Its ConsumerManager.registerConsumer and
# registerConsumerWithoutSub put the *topic* instead of the group into topicGroupTable
# (broker/.../client/ConsumerManager.java @ rocketmq-all-5.3.3, lines 244 and 295:
# `groups.add(subscriptionData.getTopic())`), and QUERY_TOPIC_CONSUME_BY_WHO answers from that table
# (AdminBrokerProcessor.queryTopicConsumeByWho -> ConsumerManager.queryTopicConsumeByWho). The entry is
# made by the consume-push heartbeat of the setup and never removed (clearTopicGroupTable removes the
# group name, which is not there). Upstream fixed it after 5.3.3 (apache/rocketmq develop 577371e208, PR
# #9424, and 921664f400, PR #9444). rmqpy reports the groups that really consume the topic, so the
# difference is kept and asserted exactly.
JAVA_533_PHANTOM_GROUP = (TOPIC, TOPIC, str(N_MSGS))


def test_stats_all(pair) -> None:
    ours, java = both(pair, "statsAll", "-t", TOPIC)
    ours_rows, java_rows = _stats_all(ours), _stats_all(java)
    assert ours_rows, ours
    assert JAVA_533_PHANTOM_GROUP not in ours_rows, ours
    assert java_rows == sorted(ours_rows + [JAVA_533_PHANTOM_GROUP]), f"rmqpy:\n{ours}\njava:\n{java}"


# ---------------------------------------------------------------------- SEARCH_OFFSET_BY_TIMESTAMP
TIME_TOPIC = "ParityTime"


def _send_batch(addr: str, bodies: list[str]) -> None:
    """A raw SEND_BATCH_MESSAGE to queue 0 of TIME_TOPIC (made on the first send, 4 queues): its
    messages share one store time on either broker."""
    h = SendMessageRequestHeaderV2(a="parity_time_p", b=TIME_TOPIC, c="TBW102", d=4, e=0, f=0,
                                   g=int(time.time() * 1000), h=0, i=properties_to_string({"WAIT": "true"}),
                                   j=0, k=False, m=True)
    body = encode_batch_body([(0, b.encode(), {}) for b in bodies])
    with BlockingClient(addr, timeout=5.0) as c:
        r = c.invoke(RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, h, body))
    assert r.code == 0, (addr, r.code, r.remark)


def _store_times(addr: str, count: int) -> list[int] | None:
    """The store times of queue 0's messages (a raw pull from offset 0), once it has ``count``."""
    req = pull_request("parity_time_g", MessageQueue(TIME_TOPIC, BROKER, 0), 0, 32, subscription(TIME_TOPIC, "*"))
    with BlockingClient(addr, timeout=5.0) as c:
        r = c.invoke(req)
    times = [m.store_timestamp for m in decode_records(r.body)] if r.code == 0 and r.body else []
    return times if len(times) == count else None


def _search_answers(side: Side) -> dict:
    """Queue 0 of TIME_TOPIC gets a batch of 3 then, 50 ms later, one of 2 (store times A, A, A, B, B);
    then the official clients ask SEARCH_OFFSET_BY_TIMESTAMP around A and B, on queue 0 and on the
    empty queue 1: the 5.3.3 client with each boundary (searchOffset sends LOWER), the 4.9.8 client
    with none. Answers keyed by (question, client, boundary, queue), the question named by its place
    relative to A and B, as each broker has its own store times."""
    _send_batch(side.broker_addr, ["a0", "a1", "a2"])
    time.sleep(0.05)
    _send_batch(side.broker_addr, ["b0", "b1"])
    times = wait_until(lambda: _store_times(side.broker_addr, 5), 20, 0.2,
                       what=f"{side.name}: the 5 messages in queue 0 of {TIME_TOPIC}")
    assert times is not None
    a, b = times[0], times[3]
    assert times == [a, a, a, b, b] and b - a > 4, times  # the same shape on both brokers
    named = {"0": 0, "A-1": a - 1, "A": a, "A+1": a + 1, "(A+B)/2": (a + b) // 2, "B-1": b - 1, "B": b,
             "B+1": b + 1, "B+1e6": b + 10**6}
    args = ["search-offset", "-t", TIME_TOPIC, "--broker-name", BROKER, "--queue-ids", "0,1",
            "--timestamps", ",".join(str(t) for t in named.values())]
    by_time = {t: name for name, t in named.items()}
    answers = {}
    for version, boundaries in (("5.3.3", "none,lower,upper"), ("4.9.8", "none")):
        out = clients.harness(side.host, version, [args[0], "-n", side.ns_addr, *args[1:], "--boundaries", boundaries],
                              timeout=90)
        for e in out.of("offset"):
            answers[(by_time[e["timestamp"]], version, e["boundary"], e["queueId"])] = e["offset"]
    assert len(answers) == len(named) * 4 * 2, answers
    return answers


def test_search_offset_by_time_same_as_java(pair) -> None:
    """SEARCH_OFFSET_BY_TIMESTAMP (29), asked by the official clients of both generations: every answer
    as the Java 5.3.3 broker's, question by question (boundaries, equal store times, before the first
    and after the last message, an empty queue)."""
    ours, java, _ = pair
    with ThreadPoolExecutor(2) as pool:
        mine, theirs = pool.map(_search_answers, (ours, java))
    diff = {k: (mine.get(k), theirs.get(k)) for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)}
    assert not diff, f"(question, client, boundary, queue): (rmqpy, java): {diff}"
    # what Java answered, for the record: LOWER the first at or after, UPPER the last at or before
    assert [theirs[(q, "5.3.3", "upper", 0)] for q in ("A-1", "A", "A+1", "B", "B+1e6")] == [0, 2, 2, 4, 4]
    assert [theirs[(q, "4.9.8", "none", 0)] for q in ("A-1", "A", "A+1", "B", "B+1e6")] == [0, 0, 3, 3, 5]


def test_delete_sub_group_and_topic(pair) -> None:
    assert_same(*both(pair, "deleteSubGroup", "-b", "{broker}", "-g", CLONE))
    assert_same(*both(pair, "deleteTopic", "-t", TOPIC, "-c", "DefaultCluster"))
    ours, java = both(pair, "topicRoute", "-t", TOPIC)
    assert_same(ours, java)


def test_broker_config_lists_every_java_key(pair) -> None:
    """``getBrokerConfig``: every key the Java broker lists, rmqpy lists too (its own value, or Java's
    default for a setting it does not have: rmqpy/broker/java_config.py)."""
    def keys(text: str) -> set[str]:
        return {m.group(1) for m in re.finditer(r"^(\w+)\s+=  ", text, re.M)}
    ours, java = both(pair, "getBrokerConfig", "-b", "{broker}")
    assert len(keys(java)) >= 400, java
    # rocketmqHome, storePathCommitLog: set in the Java broker's broker.conf only (Java lists its file's keys)
    missing = keys(java) - keys(ours) - {"rocketmqHome", "storePathCommitLog"}
    assert not missing, f"missing in rmqpy's getBrokerConfig: {sorted(missing)}"
