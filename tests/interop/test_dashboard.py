"""Apache rocketmq-dashboard against rmqpy: what its pages show for cluster, topic, consumer, message and send.

The dashboard (a Spring Boot jar, its frontend skipped) runs in a client host like the official
clients, pointed at rmqpy's name server; the test calls the JSON endpoints its pages call and checks
each answer against what is true: the broker that runs, the topic created through the dashboard, the
message sent through its "send" action (found by id, key and time), and a Java push consumer's group
(connection, subscription, offsets, running info, the client's inner producer). The jar is not on
Maven Central: it comes from ``RMQPY_DASHBOARD_JAR``, or is built with Maven (frontend skipped) from
the source tree ``RMQPY_DASHBOARD_SRC`` names, a checkout or a bare git directory of the project (its
newest ``rocketmq-dashboard-*`` tag that builds), and kept in the machine-wide cache of the other interop
builds (tests/interop/build_cache.sh) keyed by the hash of its sources, so Maven runs once per source.
Without either variable the module skips (CI has neither); docs/dashboard.md says how to build and run
it by hand. The helpers live here, not in a module of their own: a new file under tests/interop/ would
change the inputs of every reference run (tests/reference.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import ports
from tests.interop import clients, servers
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop
VERSION = "5.3.3"  # the Java client of the consumer (the dashboard 2.1.0 bundles the 5.3.3 client)
TOPIC, GROUP, KEY, TAG, BODY = "DashTopic", "DashGroup", "dash-key-1", "dashTag", "sent from the dashboard"


# ------------------------------------------------------------------ the jar and its endpoints

ENV_JAR = "RMQPY_DASHBOARD_JAR"
ENV_SRC = "RMQPY_DASHBOARD_SRC"
TAG_PREFIX = "rocketmq-dashboard-"
#: Maven's switches: no tests, and none of the frontend (Node and npm download a toolchain of their own,
#: which this machine cannot), its copy step, or the release checks (style, licence headers, coverage)
MVN_ARGS = ["-B", "-q", "-Dstyle.color=never", "-DskipTests", "-Dmaven.test.skip=true",
            "-Dskip.installnodenpm", "-Dskip.npm", "-Dmaven.antrun.skip=true", "-Drat.skip=true",
            "-Djacoco.skip=true", "-Dcheckstyle.skip=true", "package"]
#: what a frontend-less build reads of the source tree
PARTS = ("pom.xml", "src")
#: a built jar in the cache is found by this name, under the cache's dashboard/ directory
BUILT_NAME = "rocketmq-dashboard-{key}.jar"


class Unavailable(Exception):
    """No dashboard jar here: the message is the skip reason."""


def cache_dir(env: dict[str, str] | os._Environ[str] = os.environ) -> Path | None:
    """The cache build_cache.sh would choose (None for ``RMQPY_BUILD_CACHE=off``)."""
    chosen = env.get("RMQPY_BUILD_CACHE", "")
    if chosen == "off":
        return None
    if not chosen:
        system = Path("/var/cache/rmqpy-interop")
        try:
            system.mkdir(parents=True, exist_ok=True)
            if os.access(system, os.W_OK):
                return system / "dashboard"
        except OSError:
            pass
        chosen = str(Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rmqpy-interop")
    return Path(chosen) / "dashboard"


def _git(src: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(src), *args], check=True, capture_output=True, text=True,
                          timeout=120).stdout.strip()


def _sources_key(tree: Path) -> str:
    """A hash of the names and contents of pom.xml and src/main/ (what a frontend-less build reads)."""
    h = hashlib.sha256()
    files = [tree / "pom.xml", *sorted(p for p in (tree / "src" / "main").rglob("*") if p.is_file())]
    for f in files:
        h.update(str(f.relative_to(tree)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:24]


def candidates(src: Path) -> list[tuple[str, str]]:
    """(label, key) of what can be built from ``src``: the checkout itself, or a bare git directory's
    two newest release tags, newest first (the second is tried once when the first does not build)."""
    if (src / "pom.xml").is_file():
        return [(str(src), _sources_key(src))]
    try:
        tags = _git(src, "tag", "-l", TAG_PREFIX + "*", "--sort=-v:refname").split()
        return [(tag, _git(src, "rev-parse", f"{tag}^{{tree}}")[:24]) for tag in tags[:2]]
    except (OSError, subprocess.SubprocessError):
        return []


def _unpack(src: Path, label: str, into: Path) -> None:
    if label == str(src):
        shutil.copy2(src / "pom.xml", into / "pom.xml")
        shutil.copytree(src / "src", into / "src")
        return
    archive = subprocess.run(["git", "-C", str(src), "archive", label, *PARTS], check=True,
                             capture_output=True, timeout=300).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True, timeout=300)


def build(src: Path, cache: Path | None, log: list[str]) -> Path:
    """The jar built from ``src`` (from the cache when it holds one for the same sources)."""
    if shutil.which("mvn") is None or shutil.which("java") is None:
        raise Unavailable(f"{ENV_SRC} is set but mvn or java is missing: cannot build rocketmq-dashboard")
    found = candidates(src)
    if not found:
        raise Unavailable(f"{ENV_SRC}={src} is neither a checkout (pom.xml) nor a git directory with "
                          f"{TAG_PREFIX}* tags")
    where = cache or Path(tempfile.gettempdir()) / f"rmqpy-dashboard-{os.getuid()}"
    where.mkdir(parents=True, exist_ok=True)
    with open(where / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one Maven build per cache (pytest workers may all ask)
        for label, key in found:
            jar = where / BUILT_NAME.format(key=key)
            if jar.is_file():
                return jar
            with tempfile.TemporaryDirectory(prefix="dashboard-build-") as tmp:
                _unpack(src, label, Path(tmp))
                mvn = ["mvn", *MVN_ARGS]
                if os.environ.get("MAVEN_REPO_LOCAL"):
                    mvn.insert(1, f"-Dmaven.repo.local={os.environ['MAVEN_REPO_LOCAL']}")
                run = subprocess.run(mvn, cwd=tmp, capture_output=True, text=True, timeout=1500)
                built = sorted(Path(tmp, "target").glob("rocketmq-dashboard-*.jar"))
                if run.returncode != 0 or not built:
                    errors = [x for x in (run.stdout + run.stderr).splitlines() if x.startswith("[ERROR] ") and x[8:].strip()]
                    log.append(f"{label}: mvn exited {run.returncode}: {(errors or ['no [ERROR] line'])[0][:400]}")
                    continue
                part = jar.with_suffix(f".tmp{os.getpid()}")
                shutil.copyfile(built[0], part)
                part.replace(jar)
                return jar
    raise Unavailable("rocketmq-dashboard did not build from " + f"{src}: " + " | ".join(log))


def locate(env: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """The dashboard jar to run, or :class:`Unavailable` with the reason (the test's skip message)."""
    if env.get(ENV_JAR):
        jar = Path(env[ENV_JAR])
        if not jar.is_file():
            raise Unavailable(f"{ENV_JAR}={jar} is not a file")
        return jar
    if env.get(ENV_SRC):
        return build(Path(env[ENV_SRC]), cache_dir(env), [])
    raise Unavailable(f"rocketmq-dashboard is not on Maven Central: set {ENV_JAR} to its jar or {ENV_SRC} "
                      "to its source (docs/dashboard.md)")


def command(jar: Path, port: int, namesrv_addr: str, data: Path) -> list[str]:
    """``java -jar`` the dashboard on ``port`` for the name server ``namesrv_addr``, its files under ``data``
    (its logs go to ``${user.home}/logs``), with no background collection: only what is asked is run."""
    return ["java", "-Xms128m", "-Xmx384m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
            f"-Duser.home={data}", "-jar", str(jar), f"--server.port={port}",
            f"--rocketmq.config.namesrvAddrs={namesrv_addr}", f"--rocketmq.config.dataPath={data / 'data'}",
            "--rocketmq.config.enableDashBoardCollect=false"]


class Rest:
    """The dashboard's JSON endpoints as its pages call them; :meth:`get`/:meth:`post` answer ``data`` of
    its ``{"status", "data", "errMsg"}`` envelope and fail on a non-zero status."""

    def __init__(self, base: str, timeout: float = 60) -> None:
        self.base, self.timeout = base, timeout

    def raw(self, method: str, path: str, body: object = None, **query: object) -> object:
        url = self.base + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if body is None else json.dumps(body).encode()
        headers = {} if body is None else {"Content-Type": "application/json"}
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            text = resp.read().decode()
        try:
            return json.loads(text)
        except ValueError:
            return text  # a few endpoints answer a bare string (rocketmq/nsaddr.query)

    def _data(self, answer: object, path: str) -> object:
        assert isinstance(answer, dict) and answer.get("status") == 0, f"{path}: {answer}"
        return answer["data"]

    def get(self, path: str, **query: object) -> object:
        return self._data(self.raw("GET", path, **query), path)

    def post(self, path: str, body: object = None, **query: object) -> object:
        return self._data(self.raw("POST", path, body, **query), path)

    def wait_ready(self, timeout: float, alive) -> None:
        """Until the cluster page answers (a Spring Boot start takes 10 s idle, over a minute on a busy
        machine); ``alive()`` false means the process is gone."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            if not alive():
                raise AssertionError(f"the dashboard exited before it answered: {last}")
            try:
                answer = self.raw("GET", "/cluster/list.query")
                if isinstance(answer, dict) and answer.get("status") == 0:
                    return
                last = answer
            except (OSError, urllib.error.URLError) as e:
                last = e
            time.sleep(0.5)
        raise AssertionError(f"the dashboard did not answer within {timeout}s: {last}")


# ------------------------------------------------------------------ the pages

@dataclass
class Env:
    cluster: servers.Cluster
    host: object
    rest: Rest
    tmp: Path


@pytest.fixture(scope="module")
def jar() -> Path:
    try:
        return locate()
    except Unavailable as e:
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
            proc = host.popen(command(local, port, c.ns_addr, tmp / "home"), cwd=str(tmp),
                              stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            rest = Rest(f"http://{host.client_ip}:{port}")
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


# the page reads each queue from SEARCH_OFFSET_BY_TIMESTAMP's answers for the begin and the end time: 5.x's
# LOWER boundary, the queue's max offset after its last message (4.9's nearest offset missed the last one)
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
    # the dashboard's own send producer is shut down once its send is done: its group is unknown
    answer = env.rest.raw("GET", "/producer/producerConnection.query", producerGroup="SELF_TEST_P_GROUP", topic=TOPIC)
    assert answer["status"] == -1 and "the producer group[SELF_TEST_P_GROUP] not exist" in answer["errMsg"], answer
