"""Apache rocketmq-dashboard against rmqpy: what its pages show for cluster, topic, consumer, message and send.

The dashboard (a Spring Boot jar, its frontend skipped) runs in a client host like the official
clients, pointed at rmqpy's name server; the test calls the JSON endpoints its pages call and checks
each answer against what is true: the broker that runs, the topic created through the dashboard, the
message sent through its "send" action (found by id, key and time), and a Java push consumer's group
(connection, subscription, offsets, running info, the client's inner producer). The jar is not on
Maven Central: without ``RMQPY_DASHBOARD_JAR`` or ``RMQPY_DASHBOARD_SRC`` the module skips
(tests/interop/dashboard.py; docs/dashboard.md says how to build and run it by hand).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import ports
from tests.interop import clients, dashboard, servers
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop
VERSION = "5.3.3"  # the Java client of the consumer (the dashboard 2.1.0 bundles the 5.3.3 client)
TOPIC, GROUP, KEY, TAG, BODY = "DashTopic", "DashGroup", "dash-key-1", "dashTag", "sent from the dashboard"


@dataclass
class Env:
    cluster: servers.Cluster
    host: object
    rest: dashboard.Rest
    tmp: Path


@pytest.fixture(scope="module")
def jar() -> Path:
    try:
        return dashboard.locate()
    except dashboard.Unavailable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def env(jar, request, tmp_path_factory):
    # asked for only once there is a jar: a skip starts no JVM and no client host
    request.getfixturevalue("java_built")
    host = request.getfixturevalue("client_host")
    tmp = tmp_path_factory.mktemp("dashboard")
    local = tmp / jar.name  # under the test's tmp: what a podman client host mounts
    try:
        os.link(jar, local)
    except OSError:
        shutil.copyfile(jar, local)
    with servers.Cluster(tmp / "rmqpy", host.host_ip) as c:
        port = ports.free_port()  # in the client host's own network
        with open(tmp / "dashboard.log", "wb") as log:
            proc = host.popen(dashboard.command(local, port, c.ns_addr, tmp / "home"), cwd=str(tmp),
                              stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            rest = dashboard.Rest(f"http://{host.client_ip}:{port}")
            try:
                rest.wait_ready(240, lambda: proc.poll() is None)
            except AssertionError as e:
                raise AssertionError(f"{e}\n{(tmp / 'dashboard.log').read_text()[-3000:]}") from None
            yield Env(c, host, rest, tmp)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(30)


def test_cluster_page_shows_the_rmqpy_broker(env) -> None:
    c, rest = env.cluster, env.rest
    page = rest.get("/cluster/list.query")
    info = page["clusterInfo"]
    assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-py"]}
    assert info["brokerAddrTable"]["broker-py"]["brokerAddrs"] == {"0": c.broker_addr}
    stats = page["brokerServer"]["broker-py"]["0"]  # the broker's runtime table, as the page's detail shows
    assert stats["brokerVersionDesc"] == "V5_3_3" and stats["brokerActive"] == "true", stats
    assert {"putTps", "getTotalTps", "commitLogDirCapacity", "runtime", "bootTimestamp"} <= set(stats)
    config = rest.get("/cluster/brokerConfig.query", brokerAddr=c.broker_addr)
    assert config["brokerName"] == "broker-py" and config["brokerClusterName"] == "DefaultCluster"
    assert config["listenPort"] == c.broker_addr.rsplit(":", 1)[1]
    assert rest.raw("GET", "/rocketmq/nsaddr.query") == c.ns_addr


@pytest.fixture(scope="module")
def topic(env) -> str:
    """The topic, created with the topic page's "add" dialog (4 queues on the cluster)."""
    assert env.rest.post("/topic/createOrUpdate.do", {
        "clusterNameList": ["DefaultCluster"], "brokerNameList": [], "topicName": TOPIC, "writeQueueNums": 4,
        "readQueueNums": 4, "perm": 6, "order": False, "messageType": "NORMAL"}) is True
    return TOPIC


def test_topic_page_lists_and_routes_the_created_topic(env, topic) -> None:
    c, rest = env.cluster, env.rest
    listed = rest.get("/topic/list.query", skipSysProcess="true", skipRetryAndDlq="true")["topicList"]
    assert TOPIC in listed and "TBW102" in listed
    typed = rest.get("/topic/list.queryTopicType")
    types = dict(zip(typed["topicNameList"], typed["messageTypeList"]))
    assert types[TOPIC] == "NORMAL" and types["%SYS%TBW102"] == "SYSTEM"
    route = rest.get("/topic/route.query", topic=TOPIC)
    assert [(q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]] \
        == [("broker-py", 4, 4, 6)]
    assert [b["brokerAddrs"] for b in route["brokerDatas"]] == [{"0": c.broker_addr}]
    [config] = rest.get("/topic/examineTopicConfig.query", topic=TOPIC)
    assert (config["brokerNameList"], config["writeQueueNums"], config["readQueueNums"], config["perm"],
            config["messageType"]) == (["broker-py"], 4, 4, 6, "NORMAL")


@pytest.fixture(scope="module")
def sent(env, topic) -> dict:
    """The topic's one message, sent by the dashboard's "send" action (the topic page's dialog)."""
    result = env.rest.post("/topic/sendTopicMessage.do", {"topic": TOPIC, "key": KEY, "tag": TAG,
                                                         "messageBody": BODY, "traceEnabled": False})
    assert result["sendStatus"] == "SEND_OK", result
    return result


def test_send_then_the_topic_stats_count_it(env, sent) -> None:
    assert sent["messageQueue"]["brokerName"] == "broker-py" and sent["queueOffset"] == 0
    stats = env.rest.get("/topic/stats.query", topic=TOPIC)["offsetTable"]
    assert len(stats) == 4
    maxima = {k.split("queueId=")[1].rstrip("]"): v["maxOffset"] for k, v in stats.items()}
    assert maxima == {str(q): int(q == sent["messageQueue"]["queueId"]) for q in range(4)}


def test_message_page_finds_the_sent_message_by_id_key_and_time(env, sent) -> None:
    rest, msg_id = env.rest, sent["msgId"]
    view = rest.get("/message/viewMessage.query", topic=TOPIC, msgId=msg_id)["messageView"]
    assert (view["msgId"], view["topic"], view["messageBody"], view["queueId"]) \
        == (msg_id, TOPIC, BODY, sent["messageQueue"]["queueId"])
    assert view["properties"]["TAGS"] == TAG and view["properties"]["KEYS"] == KEY
    assert view["storeHost"] == env.cluster.broker_addr
    # the key is in the index once the dispatch has run (at once, but asked right after the send)
    by_key = wait_until(lambda: rest.get("/message/queryMessageByTopicAndKey.query", topic=TOPIC, key=KEY), 10)
    assert [m["msgId"] for m in by_key] == [msg_id] and by_key[0]["messageBody"] == BODY
    now = int(time.time() * 1000)
    by_time = rest.get("/message/queryMessageByTopic.query", topic=TOPIC, begin=now - 600_000, end=now + 60_000)
    assert [m["msgId"] for m in by_time] == [msg_id]


@pytest.mark.xfail(strict=True, reason="rmqpy answers SEARCH_OFFSET_BY_TIMESTAMP with 4.9's nearest-message "
                   "offset, not 5.x's boundary (LOWER: the queue's max offset after its last message), so the "
                   "paged topic query stops one message short per queue (docs/dashboard.md)")
def test_message_page_by_topic_paged_lists_the_sent_message(env, sent) -> None:
    now = int(time.time() * 1000)
    page = env.rest.post("/message/queryMessagePageByTopic.query", {
        "topic": TOPIC, "begin": now - 600_000, "end": now + 60_000, "pageNum": 1, "pageSize": 20, "taskId": ""})
    assert [m["msgId"] for m in page["page"]["content"]] == [sent["msgId"]]


@pytest.fixture(scope="module")
def consumer(env, sent):
    """A Java push consumer of GROUP on the topic, running (it has consumed the dashboard's message)."""
    with clients.BackgroundHarness(env.host, VERSION, [
            "consume-push", "-n", env.cluster.ns_addr, "-t", TOPIC, "-g", GROUP, "--count", "1000",
            "--timeout-ms", "300000"], env.tmp / "consumer.jsonl") as h:
        started = h.wait_for("started", 90)
        got = h.wait_for("received", 60)
        assert got["msgId"] == sent["msgId"] and got["body"] == BODY
        yield started["clientId"]


def test_consumer_page_shows_the_running_group(env, consumer) -> None:
    rest, broker = env.rest, env.cluster.broker_addr
    groups = {g["group"]: g for g in rest.get("/consumer/group.refresh.all")}  # the page's refresh button
    g = groups[GROUP]
    assert (g["count"], g["consumeType"], g["messageModel"], g["version"], g["address"], g["subGroupType"]) \
        == (1, "CONSUME_PASSIVELY", "CLUSTERING", "V5_3_3", [broker], "NORMAL"), g
    conn = rest.get("/consumer/consumerConnection.query", consumerGroup=GROUP, address=broker)
    assert [(x["clientId"], x["language"], x["versionDesc"]) for x in conn["connectionSet"]] \
        == [(consumer, "JAVA", "V5_3_3")]
    assert set(conn["subscriptionTable"]) == {TOPIC, f"%RETRY%{GROUP}"}
    assert conn["subscriptionTable"][TOPIC]["subString"] == "*"
    [config] = rest.get("/consumer/examineSubscriptionGroupConfig.query", consumerGroup=GROUP)
    assert config["brokerNameList"] == ["broker-py"] and config["subscriptionGroupConfig"]["groupName"] == GROUP
    assert rest.get("/consumer/fetchBrokerNameList.query", consumerGroup=GROUP) == ["broker-py"]


def test_topic_page_names_the_group_that_consumes_it(env, consumer) -> None:
    # QUERY_TOPIC_CONSUME_BY_WHO; Java 5.3.3 answered ["DashTopic"] here, the topic's name (docs/dashboard.md)
    assert env.rest.get("/topic/queryTopicConsumerInfo.query", topic=TOPIC)["groupList"] == [GROUP]


def test_consumer_progress_shows_the_committed_offsets(env, consumer, sent) -> None:
    rest, queue = env.rest, sent["messageQueue"]["queueId"]

    def progress() -> dict | None:  # the push consumer commits its offsets every 5 s
        topics = rest.get("/consumer/queryTopicByConsumer.query", consumerGroup=GROUP, address=env.cluster.broker_addr)
        mine = {t["topic"]: t for t in topics}.get(TOPIC)
        return mine if mine and mine["diffTotal"] == 0 and any(
            q["consumerOffset"] == 1 for q in mine["queueStatInfoList"]) else None

    mine = wait_until(progress, 30, what="the consumer's offset of the sent message",
                      diag=lambda: str(rest.raw("GET", "/consumer/queryTopicByConsumer.query", consumerGroup=GROUP,
                                                address=env.cluster.broker_addr)))
    rows = {q["queueId"]: q for q in mine["queueStatInfoList"]}
    assert sorted(rows) == [0, 1, 2, 3]
    assert all(q["brokerOffset"] == q["consumerOffset"] == int(i == queue) for i, q in rows.items()), rows
    assert {q["clientInfo"] for q in rows.values()} == {consumer}
    by_topic = rest.get("/topic/queryConsumerByTopic.query", topic=TOPIC)
    assert by_topic[GROUP]["diffTotal"] == 0


def test_consumer_running_info_comes_from_the_client_through_the_broker(env, consumer) -> None:
    # GET_CONSUMER_RUNNING_INFO: the broker asks the client over the client's own connection
    info = env.rest.get("/consumer/consumerRunningInfo.query", consumerGroup=GROUP, clientId=consumer,
                        jstack="false")
    assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    assert TOPIC in {s["topic"] for s in info["subscriptionSet"]}


def test_producer_page_shows_the_clients_inner_producer(env, consumer) -> None:
    # every Java client instance registers its inner producer group (for sending back) in its heartbeats
    conn = env.rest.get("/producer/producerConnection.query", producerGroup="CLIENT_INNER_PRODUCER", topic=TOPIC)
    assert consumer in {x["clientId"] for x in conn["connectionSet"]}, conn
    assert {x["language"] for x in conn["connectionSet"]} == {"JAVA"}
