"""Plain ACL (``aclEnable=true``) of the rmqpy broker against the official Java clients, with the
Java 4.9.7 broker as the reference.

The same ``plain_acl.yml`` is given to rmqpy's broker and to the real 4.9.7 broker (the 5.3.3
broker no longer enforces plain ACL: ``aclEnable`` is read and ignored there, ACL 1.0 files are
only migrated by 5.x's authentication). The official 4.9.8 and 5.3.3 clients sign with their
own ``AclClientRPCHook``; the harness' ``acl`` command runs a matrix of sends, pulls and topic
creations as several identities (admin, user, unknown key, wrong secret, no signature, no
credentials, a white-listed address) in one JVM, and the answers of both brokers must agree,
remark for remark. mqadmin signs with ``$ROCKETMQ_HOME/conf/tools.yml``.
"""
from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.interop import clients, goharness, jvm, servers
from tests.interop.conftest import VERSIONS
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

USER, USER_SK = "rmqpyuser", "usersecret1"
ADMIN, ADMIN_SK = "rmqpyadmin", "adminsecret1"
WHITE = "rmqpywhite"


def acl_yaml(client_ip: str, global_white: list[str]) -> str:
    return textwrap.dedent(f"""\
        globalWhiteRemoteAddresses: {global_white!r}
        accounts:
          - accessKey: {USER}
            secretKey: {USER_SK}
            whiteRemoteAddress:
            admin: false
            defaultTopicPerm: DENY
            defaultGroupPerm: SUB
            topicPerms:
              - topicPub=PUB|SUB
              - topicDeny=DENY
              - topicSub=SUB
              - topicPush=PUB|SUB
            groupPerms:
              - groupDeny=DENY
          - accessKey: {ADMIN}
            secretKey: {ADMIN_SK}
            admin: true
          - accessKey: {WHITE}
            secretKey: whitesecret1
            whiteRemoteAddress: {client_ip}
            defaultTopicPerm: DENY
        """)


IDS = [f"user={USER}:{USER_SK}", f"admin={ADMIN}:{ADMIN_SK}", "stranger=nobody99:whatever1",
       f"forger={USER}:wrongsecret", f"unsigned={USER}:{USER_SK}:none", f"white={WHITE}:wrongsecret1"]
# (probe, allowed?)
MATRIX = [
    ("admin/create-topic:topicPub", True), ("admin/create-topic:topicDeny", True),
    ("admin/create-topic:topicSub", True),
    ("user/create-topic:topicX", False),  # an admin code
    ("user/send:topicPub", True), ("user/send:topicDeny", False), ("user/send:topicSub", False),
    ("user/send:topicOther", False),  # defaultTopicPerm DENY
    ("user/pull:topicPub:groupOk", True), ("user/pull:topicDeny:groupOk", False),
    ("user/pull:topicPub:groupDeny", False),
    ("stranger/send:topicPub", False), ("forger/send:topicPub", False), ("unsigned/send:topicPub", False),
    ("anon/send:topicPub", False), ("white/send:topicDeny", True),
]


def outcome(event: dict) -> tuple:
    """(ok, response code, the broker's remark) of a probe event."""
    if event.get("ok"):
        return (True, None, None)
    remark = None
    for e in [event, *event.get("causes", [])]:
        if e.get("class", "").endswith("MQBrokerException"):
            remark = e.get("errorMessage")
    return (False, event.get("responseCode"), remark)


def run_matrix(host, version: str, ns_addr: str, broker_addr: str, probes: list[str]) -> dict[str, tuple]:
    args = ["acl", "-n", ns_addr, "--broker", broker_addr, "--timeout-ms", "5000"]
    for i in IDS:
        args += ["--id", i]
    for p in probes:
        args += ["--probe", p]
    events = clients.harness(host, version, args, timeout=180)
    return {e["probe"]: outcome(e) for e in events.of("probe")}


def write_home(home: Path, client_ip: str, global_white: list[str] | None = None) -> Path:
    jvm.prepare_home(home)
    (home / "conf" / "plain_acl.yml").write_text(acl_yaml(client_ip, global_white or ["10.250.250.250"]))
    return home


@pytest.fixture(scope="module")
def rmqpy_acl(tmp_path_factory, client_host):
    tmp = tmp_path_factory.mktemp("acl-rmqpy")
    home = write_home(tmp / "home", client_host.client_ip)
    with servers.Cluster(tmp, client_host.host_ip, {"aclEnable": True, "rocketmqHome": home}) as c:
        c.home = home
        yield c


@pytest.fixture(scope="module")
def java_acl(tmp_path_factory, client_host, java_built):
    tmp = tmp_path_factory.mktemp("acl-java")
    write_home(tmp / "java-broker", client_host.client_ip)
    c = jvm.JavaCluster("4.9.8", tmp, client_host.host_ip, {"aclEnable": True})
    yield c
    c.close(clean=False)


@pytest.fixture(scope="module")
def java_outcomes(java_acl, client_host):
    return {v: run_matrix(client_host, v, java_acl.ns_addr, java_acl.broker_addr, [p for p, _ in MATRIX])
            for v in VERSIONS}


@pytest.mark.parametrize("version", VERSIONS)
def test_matrix_same_as_java_4_9_7(rmqpy_acl, java_outcomes, client_host, version):
    ours = run_matrix(client_host, version, rmqpy_acl.ns_addr, rmqpy_acl.broker_addr, [p for p, _ in MATRIX])
    theirs = java_outcomes[version]
    for probe, allowed in MATRIX:
        assert theirs[probe][0] is allowed, f"Java 4.9.7 broker: {probe}: {theirs[probe]}"
        assert ours[probe][0] is allowed, f"rmqpy: {probe}: {ours[probe]}"
    assert ours == theirs
    # what a user reads, e.g.:
    assert ours["stranger/send:topicPub"][1:] == (1, "org.apache.rocketmq.acl.common.AclException: No acl config "
                                                  "for nobody99, org.apache.rocketmq.acl.plain.PlainPermissionManager."
                                                  "validate(PlainPermissionManager.java:667)")


def mqadmin(host, version: str, home: Path, args: list[str]) -> str:
    """mqadmin's stdout and stderr (it prints a refused command's exception there, and exits 0)."""
    cmd = jvm.java_cmd(version, jvm.FASTEXIT_MAIN, [jvm.MQADMIN_MAIN, *args],  # without the 3 s exit wait
                       {"rocketmq.home.dir": str(home), "rmq.logback.configurationFile": "rmq.tools.logback.xml"},
                       kind="harness", home=home)
    proc = host.run(cmd, timeout=90, cwd=str(home), env=jvm._env(home), stdin=subprocess.DEVNULL)
    return proc.stdout + proc.stderr


@pytest.mark.parametrize("version", VERSIONS)
def test_push_consume_with_credentials(rmqpy_acl, client_host, version):
    """A signed producer and a signed push consumer (heartbeats, rebalance, pulls, offset commits, each
    checked by the ACL) move messages through rmqpy (denied pulls: the matrix above)."""
    creds = ["--access-key", USER, "--secret-key", USER_SK]
    topic, run = "topicPush", f"push{version.replace('.', '')}"
    sent = clients.harness(client_host, version, ["produce", "-n", rmqpy_acl.ns_addr, "-t", topic, "-c", "3",
                                                  "--body", run + "-{i}", *creds])
    assert len(sent.of("sent")) == 3, sent
    got = clients.harness(client_host, version, ["consume-push", "-n", rmqpy_acl.ns_addr, "-t", topic,
                                                 "-g", f"group{run}", "-c", "3", "--from", "first",
                                                 "--timeout-ms", "30000", *creds], check=False)
    bodies = {e.get("body") for e in got.of("received")}
    assert {f"{run}-{i}" for i in range(3)} <= bodies, got


def tools_home(tmp: Path, ak: str, sk: str) -> Path:
    home = jvm.prepare_home(tmp)
    (home / "conf" / "tools.yml").write_text(f"accessKey: {ak}\nsecretKey: {sk}\n")
    return home


@pytest.mark.parametrize("version", VERSIONS)
def test_mqadmin_update_topic_needs_admin(rmqpy_acl, client_host, tmp_path, version):
    def update_topic(ak: str, sk: str, topic: str) -> str:
        return mqadmin(client_host, version, tools_home(tmp_path / ak, ak, sk),
                       ["updateTopic", "-n", rmqpy_acl.ns_addr, "-b", rmqpy_acl.broker_addr, "-t", topic])
    out = update_topic(USER, USER_SK, f"mqadminDenied{version.replace('.', '')}")
    assert "Need admin permission for request code=17, but accessKey=rmqpyuser is not" in out, out
    out = update_topic(ADMIN, ADMIN_SK, f"mqadminOk{version.replace('.', '')}")
    assert "create topic to " in out and "success" in out, out


def wait_log(server: servers.ServerProcess, text: str, since: int, timeout: float = 10) -> None:
    assert wait_until(lambda: text in server.log_tail(10**7)[since:], timeout, 0.05), \
        f"{text!r} not logged:\n{server.log_tail()}"


def test_hot_reload_and_global_white_address(tmp_path, client_host):
    """Rewriting plain_acl.yml under a running broker: the client's address becomes globally white
    (unsigned sends pass); a broken file then keeps those rules and logs one error."""
    home = write_home(tmp_path / "home", client_host.client_ip)
    acl_file = home / "conf" / "plain_acl.yml"
    with servers.Cluster(tmp_path, client_host.host_ip, {"aclEnable": True, "rocketmqHome": home}) as c:
        probes = ["anon/send:topicDeny", "user/send:topicDeny"]
        before = run_matrix(client_host, VERSIONS[-1], c.ns_addr, c.broker_addr, probes)
        assert [before[p][0] for p in probes] == [False, False], before
        mark = len(c.broker.log_tail(10**7))
        acl_file.write_text(acl_yaml(client_host.client_ip, ["10.250.250.250", client_host.client_ip]))
        wait_log(c.broker, "ACL: reloaded", mark)
        after = run_matrix(client_host, VERSIONS[-1], c.ns_addr, c.broker_addr, probes)
        assert [after[p][0] for p in probes] == [True, True], after
        mark = len(c.broker.log_tail(10**7))
        acl_file.write_text("accounts: [\n  - accessKey: broken\n")
        wait_log(c.broker, "ACL: reload failed, keeping the previous rules", mark)
        kept = run_matrix(client_host, VERSIONS[-1], c.ns_addr, c.broker_addr, probes)
        assert [kept[p][0] for p in probes] == [True, True], kept
        assert c.broker.log_tail(10**7)[mark:].count("ACL: reload failed") == 1


def test_mqadmin_plain_acl_codes_and_a_yaml_the_java_broker_loads(rmqpy_acl, java_acl, client_host, tmp_path):
    """mqadmin 4.9.8's ACL commands (5.3.3's mqadmin has none left; 4.9.8 no longer has getAclConfig,
    whose GET_BROKER_CLUSTER_ACL_CONFIG is unit-tested) against rmqpy; the file rmqpy writes is then
    loaded by the Java 4.9.7 broker, whose answers to the new account match."""
    b = rmqpy_acl.broker_addr
    admin_home, user_home = tools_home(tmp_path / "admin", ADMIN, ADMIN_SK), tools_home(tmp_path / "user", USER, USER_SK)

    def admin(*args: str, home: Path = admin_home) -> str:
        return mqadmin(client_host, "4.9.8", home, [args[0], "-n", rmqpy_acl.ns_addr, "-b", b, *args[1:]])

    out = admin("updateAclConfig", "-a", "newacct01", "-s", "newsecret01", "-i", "DENY", "-t", "topicPub=PUB")
    assert f"create or update plain access config to {b} success" in out, out
    out = admin("updateAclConfig", "-a", "sneaky001", "-s", "sneaky0001", "-m", "true", home=user_home)
    assert "Need admin permission for request code=50, but accessKey=rmqpyuser is not" in out, out  # Java: allowed
    assert "broker-py" in admin("clusterAclConfigVersion")
    out = admin("updateGlobalWhiteAddr", "-g", "10.250.250.250,10.251.*.*")
    assert f"update global white remote addresses to {b} success" in out, out

    probes = ["new/send:topicPub", "new/send:topicDeny"]
    IDS.append("new=newacct01:newsecret01")
    try:
        ours = run_matrix(client_host, "4.9.8", rmqpy_acl.ns_addr, b, probes)
        assert [ours[p][0] for p in probes] == [True, False], ours
        written = yaml.safe_load((rmqpy_acl.home / "conf" / "plain_acl.yml").read_text())
        assert written["globalWhiteRemoteAddresses"] == ["10.250.250.250", "10.251.*.*"]
        assert written["accounts"][-1] == {"accessKey": "newacct01", "secretKey": "newsecret01", "admin": False,
                                           "defaultTopicPerm": "DENY", "topicPerms": ["topicPub=PUB"]}
        # the Java broker reloads the file rmqpy wrote (its watcher looks every 5 s)
        java_log = java_acl.broker.home / "logs" / "broker.log"
        loads = java_log.read_text(errors="replace").count("Broker plain acl conf data is")
        (java_acl.broker.home / "conf" / "plain_acl.yml").write_bytes((rmqpy_acl.home / "conf" / "plain_acl.yml").read_bytes())
        assert wait_until(lambda: java_log.read_text(errors="replace").count("Broker plain acl conf data is") > loads,
                          30, 0.2), java_acl.broker.log_tail()
        theirs = run_matrix(client_host, "4.9.8", java_acl.ns_addr, java_acl.broker_addr, probes)
        assert theirs == ours
        out = admin("deleteAclConfig", "-a", "newacct01")
        assert f"delete plain access config account from {b} success" in out, out
        gone = run_matrix(client_host, "4.9.8", rmqpy_acl.ns_addr, b, probes[:1])
        assert gone["new/send:topicPub"][2].startswith("org.apache.rocketmq.acl.common.AclException: No acl config "
                                                       "for newacct01"), gone
    finally:
        IDS.remove("new=newacct01:newsecret01")


def test_broker_signs_its_own_requests(java_acl, tmp_path):
    """innerClientAuthenticationCredentials: the Java 4.9.7 broker's ACL checks rmqpy's outgoing
    REGISTER_BROKER (rmqpy pointed at it as if it were a name server): unsigned it is refused by
    the ACL, signed it passes the ACL and only then fails as a code a broker does not serve."""
    def registration_answer(name: str, props: dict) -> str:
        b = servers.start_broker(tmp_path / name, java_acl.broker_addr, props={"brokerName": name, **props})
        try:
            prefix = f"register broker to name server {java_acl.broker_addr} failed: "
            assert wait_until(lambda: prefix in b.log_tail(10**7), 30, 0.1), b.log_tail()
            return b.log_tail(10**7).split(prefix, 1)[1].split("\n", 1)[0]
        finally:
            b.stop()
    unsigned = registration_answer("unsigned", {})
    assert unsigned.startswith("1 org.apache.rocketmq.acl.common.AclException: No accessKey is configured"), unsigned
    creds = f'{{"accessKey":"{USER}","secretKey":"{USER_SK}"}}'
    signed = registration_answer("signed", {"innerClientAuthenticationCredentials": creds})
    assert signed == "3  request type 103 not supported", signed


@pytest.mark.skipif(not goharness.available(), reason="no Go toolchain and no built Go harness")
def test_go_client_credentials(rmqpy_acl, java_acl, client_host):
    """The Go client (rocketmq-client-go/v2, WithCredentials) signs as the Java clients do: allowed
    and denied sends answered alike by rmqpy and the Java 4.9.7 broker, and a signed push consumer."""
    creds = ["-access-key", USER, "-secret-key", USER_SK]

    def send(ns: str, topic: str, *extra: str) -> tuple[int, str]:
        ev = goharness.run(client_host, ["produce", "-n", ns, "-topic", topic, "-group", "goAclProducer",
                                         "-count", "1", "-body", "goacl", "-timeout", "20s", *extra],
                           timeout=40, check=False)
        errors = [e.get("error", "") for e in ev.errors]
        return len(ev.of("sent")), errors[0] if errors else ""

    for ns in (rmqpy_acl.ns_addr, java_acl.ns_addr):
        assert send(ns, "topicPub", *creds) == (1, ""), ns
        sent, error = send(ns, "topicDeny", *creds)
        assert sent == 0 and "No default permission for topic:topicDeny" in error, (ns, error)
        sent, error = send(ns, "topicPub", "-access-key", USER, "-secret-key", "wrongsecret")
        assert sent == 0 and "Check signature failed for accessKey=rmqpyuser" in error, (ns, error)
    assert send(rmqpy_acl.ns_addr, "topicPush", *creds)[0] == 1
    ev = goharness.run(client_host, ["consume", "-n", rmqpy_acl.ns_addr, "-topic", "topicPush", "-group",
                                     "goAclGroup", "-count", "1", "-timeout", "30s", *creds], timeout=45)
    assert ev.of("received"), ev
