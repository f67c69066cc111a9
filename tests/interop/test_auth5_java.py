"""RocketMQ 5.x authentication and authorization (``authenticationEnabled`` /
``authorizationEnabled``) of the rmqpy broker against the official clients, with the Java 5.3.3
broker as the reference.

Both brokers get the same broker.properties (the init Super user ``rocketmq``, the inner client
credentials, Java's local metadata providers named). 5.3.3 mqadmin, signing with
``$ROCKETMQ_HOME/conf/tools.yml``, creates users and ACLs on each as the Super user, and its
output must be the same line for line (broker addresses aside); a Normal user is refused the
admin codes. The harness' ``acl`` command then runs sends and pulls as several identities with
the 4.9.8 and 5.3.3 clients' ``AclClientRPCHook``: allowed, denied by policy, unknown user,
wrong secret, no signature, no credentials; both brokers must answer alike, remark for remark.
mqadmin copyUser/copyAcl move a user and its ACL from Java to rmqpy and back. Last, a user is
disabled, an ACL entry and a user are deleted, and rmqpy is restarted: its users and ACLs are
still there. Both brokers are driven at once (two threads) to keep the module short.

rmqpy's broker also serves its gRPC endpoint: the official Python client 5.1.2 with
``Credentials(ak, sk)`` (it signs each call's metadata) sends and receives as the Super user and
as Normal users (their Pub/Sub ACLs), and is refused a denied topic, a send without Pub, a wrong
secret and no credentials with the proxy's UNAUTHORIZED, as Apache's proxy 5.3.3 (authentication and authorization on, in front of the
Java broker) answers them, reason for reason (tests/unit/proxy/test_grpc_auth.py has the signature check itself).
"""
from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.interop import clients, grpcpy, jvm, servers
from tests.interop.conftest import VERSIONS
from tests.interop.test_acl_java import outcome

pytestmark = pytest.mark.interop

SUPER, SUPER_PW = "rocketmq", "12345678"
ALICE, ALICE_PW = "alice", "alicepass1"
BOB, BOB_PW = "bob", "bobpass1"
AUTH_PROPS = {
    "authenticationEnabled": True,
    "authorizationEnabled": True,
    "authenticationProvider": "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
    "authenticationMetadataProvider":
        "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",
    "authorizationProvider": "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",
    "authorizationMetadataProvider":
        "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider",
    "initAuthenticationUser": json.dumps({"username": SUPER, "password": SUPER_PW}, separators=(",", ":")),
    "innerClientAuthenticationCredentials": json.dumps({"accessKey": SUPER, "secretKey": SUPER_PW},
                                                       separators=(",", ":")),
    "autoCreateTopicEnable": False,
    "autoCreateSubscriptionGroup": True,
}
TOPICS = ("topicA", "topicD", "preX", "preD")

IDS = [f"alice={ALICE}:{ALICE_PW}", f"bob={BOB}:{BOB_PW}", f"super={SUPER}:{SUPER_PW}",
       "stranger=nobody99:whatever1", f"forger={ALICE}:wrongsecret", f"unsigned={ALICE}:{ALICE_PW}:none"]
# (probe, allowed?)
MATRIX = [
    ("alice/send:topicA", True), ("alice/send:topicD", False), ("alice/send:preX", True),
    ("alice/send:preD", False),  # Topic:preD Deny, created after Topic:pre* Allow, decides
    ("alice/pull:topicA:groupA", True), ("alice/pull:topicD:groupA", False),
    ("alice/pull:topicA:groupB", False),
    ("bob/send:topicA", False),  # no ACL at all
    ("super/send:topicD", True),  # a Super user needs no ACL
    ("stranger/send:topicA", False), ("forger/send:topicA", False), ("unsigned/send:topicA", False),
    ("anon/send:topicA", False),
]


def mqadmin(host, home: Path, args: list[str]) -> str:
    cmd = jvm.java_cmd("5.3.3", jvm.FASTEXIT_MAIN, [jvm.MQADMIN_MAIN, *args],
                       {"rocketmq.home.dir": str(home), "rmq.logback.configurationFile": "rmq.tools.logback.xml"},
                       kind="harness", home=home)
    proc = host.run(cmd, timeout=90, cwd=str(home), env=jvm._env(home), stdin=subprocess.DEVNULL)
    return proc.stdout + proc.stderr


def tools_home(tmp: Path, ak: str, sk: str) -> Path:
    home = jvm.prepare_home(tmp / f"tools-{ak}")
    (home / "conf" / "tools.yml").write_text(f"accessKey: {ak}\nsecretKey: {sk}\n")
    return home


class Admin:
    """mqadmin against one broker, as one user; output with the broker's address replaced by BROKER."""

    def __init__(self, host, tmp: Path, ns_addr: str, broker_addr: str) -> None:
        self.host, self.ns_addr, self.broker_addr = host, ns_addr, broker_addr
        self.homes = {ak: tools_home(tmp, ak, sk) for ak, sk in
                      ((SUPER, SUPER_PW), (ALICE, ALICE_PW))}

    def __call__(self, who: str, command: str, *args: str) -> str:
        out = mqadmin(self.host, self.homes[who], [command, "-n", self.ns_addr, "-b", self.broker_addr, *args])
        return "\n".join(line.rstrip() for line in out.replace(self.broker_addr, "BROKER").splitlines()
                         if line.strip() and "WARN" not in line and "SLF4J" not in line)


def setup_script(admin: Admin) -> list[str]:
    """Users and ACLs made the same way on either broker; what mqadmin printed (the topics are
    created by the Super user at the start of each matrix run)."""
    out = []
    out.append(admin(SUPER, "createUser", "-u", ALICE, "-p", ALICE_PW))
    out.append(admin(SUPER, "createUser", "-u", BOB, "-p", BOB_PW, "-t", "Normal"))
    out.append(admin(SUPER, "createAcl", "-s", f"User:{ALICE}", "-r", "Topic:topicA,Group:groupA,Topic:pre*",
                     "-a", "Pub,Sub", "-d", "Allow"))
    out.append(admin(SUPER, "createAcl", "-s", f"User:{ALICE}", "-r", "Topic:topicD,Topic:preD", "-a", "Pub,Sub",
                     "-d", "Deny"))
    return out


def inspect(admin: Admin, full: bool = True) -> list[str]:
    if not full:
        return [admin(SUPER, "listUser"), admin(SUPER, "getAcl", "-s", f"User:{ALICE}")]
    return [admin(SUPER, "getUser", "-u", ALICE), admin(SUPER, "listUser"),
            admin(SUPER, "getAcl", "-s", f"User:{ALICE}"), admin(SUPER, "listAcl")]


def both(fn, *sides):
    """``fn`` on each side at once (the two brokers are independent; their JVM clients start in parallel)."""
    with ThreadPoolExecutor(len(sides)) as pool:
        return [f.result() for f in [pool.submit(fn, side) for side in sides]]


def run_matrix(host, version: str, ns_addr: str, broker_addr: str, probes: list[str]) -> dict[str, tuple]:
    args = ["acl", "-n", ns_addr, "--broker", broker_addr, "--timeout-ms", "5000"]
    for i in IDS:
        args += ["--id", i]
    for p in [f"super/create-topic:{t}" for t in TOPICS] + probes:
        args += ["--probe", p]
    events = clients.harness(host, version, args, timeout=180)
    return {e["probe"]: outcome(e) for e in events.of("probe")}


class Side:
    """One broker's cluster with the script run: its mqadmin, setup and inspection output."""

    def __init__(self, cluster, host, tmp: Path) -> None:
        self.cluster, self.host = cluster, host
        self.admin = Admin(host, tmp, cluster.ns_addr, cluster.broker_addr)

    def run_setup(self) -> "Side":
        self.setup = setup_script(self.admin)
        self.inspect = inspect(self.admin)
        return self

    def matrix(self, version: str, probes: list[str]) -> dict[str, tuple]:
        return run_matrix(self.host, version, self.cluster.ns_addr, self.cluster.broker_addr, probes)


@pytest.fixture(scope="module")
def sides(tmp_path_factory, client_host, java_built):
    """(rmqpy, Java 5.3.3), each a name server and a broker with the same properties, set up at once."""
    tmp = tmp_path_factory.mktemp("auth5")
    with ThreadPoolExecutor(2) as pool:
        java = pool.submit(jvm.JavaCluster, "5.3.3", tmp / "java", client_host.host_ip, dict(AUTH_PROPS))
        grpc_port = servers.free_port()
        ours = pool.submit(servers.Cluster, tmp / "rmqpy", client_host.host_ip,
                           {**AUTH_PROPS, "grpcServerPort": grpc_port})
        clusters = []
        try:
            for f in (ours, java):
                clusters.append(f.result())
            pair = [Side(c, client_host, tmp / name) for c, name in zip(clusters, ("rmqpy", "java"))]
            both(Side.run_setup, *pair)
            pair[0].grpc_endpoint = f"{client_host.host_ip}:{grpc_port}"
            yield pair
        finally:
            for c in clusters:
                c.close(clean=False) if isinstance(c, jvm.JavaCluster) else c.close()


@pytest.fixture(scope="module")
def rmqpy_side(sides):
    return sides[0]


@pytest.fixture(scope="module")
def java_side(sides):
    return sides[1]


def test_mqadmin_user_and_acl_crud_same_as_java(rmqpy_side, java_side):
    assert rmqpy_side.setup == java_side.setup
    assert "create user to BROKER success." in rmqpy_side.setup
    assert "create acl to BROKER success." in rmqpy_side.setup
    assert rmqpy_side.inspect == java_side.inspect
    get_user, list_user, get_acl, list_acl = rmqpy_side.inspect
    assert ALICE_PW in get_user and "Normal" in get_user and "enable" in get_user, get_user
    assert SUPER in list_user and BOB in list_user and "Super" in list_user, list_user
    assert "Topic:topicD" in get_acl and "Deny" in get_acl and "Topic:pre*" in get_acl, get_acl
    assert get_acl in list_acl or all(line in list_acl for line in get_acl.splitlines()[1:]), list_acl


def test_normal_user_refused_admin_codes_same_as_java(rmqpy_side, java_side, client_host):
    ours, theirs = both(lambda side: [side.admin(ALICE, "createUser", "-u", "mallory", "-p", "mallorypw1", "-t",
                                                 "Super"), side.admin(ALICE, "listUser")], rmqpy_side, java_side)
    assert ours == theirs
    assert (f"CODE: 16  DESC: User:{ALICE} has no permission to access Cluster:DefaultCluster from "
            f"{client_host.client_ip}, no matched policies.") in ours[1], ours[1]


@pytest.mark.parametrize("version", VERSIONS)
def test_send_pull_matrix_same_as_java(rmqpy_side, java_side, client_host, version):
    probes = [p for p, _ in MATRIX]
    ours, theirs = both(lambda side: side.matrix(version, probes), rmqpy_side, java_side)
    for probe, allowed in MATRIX:
        assert theirs[probe][0] is allowed, f"Java 5.3.3 broker: {probe}: {theirs[probe]}"
        assert ours[probe][0] is allowed, f"rmqpy: {probe}: {ours[probe]}"
    assert ours == theirs
    assert ours["forger/send:topicA"][1:] == (16, "check signature failed.")
    assert ours["stranger/send:topicA"][1:] == (16, "User:nobody99 is not found.")
    assert ours["alice/send:topicD"][1:] == (16, f"User:{ALICE} has no permission to access Topic:topicD from "
                                                 f"{client_host.client_ip}, the decision is deny.")


PROXY_AUTH = {**{k: v for k, v in AUTH_PROPS.items() if k.startswith(("authentication", "authorization"))},
              "authenticationMetadataProvider": "org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider",
              "authorizationMetadataProvider": "org.apache.rocketmq.proxy.auth.ProxyAuthorizationMetadataProvider",
              "innerClientAuthenticationCredentials": AUTH_PROPS["innerClientAuthenticationCredentials"],
              "enableAclRpcHookForClusterMode": True}  # the proxy signs its own requests to the broker


@pytest.fixture(scope="module")
def java_grpc_endpoint(java_side, client_host, tmp_path_factory):
    """Apache's proxy 5.3.3 (cluster mode, authentication and authorization on, users and ACLs read
    from the Java broker) in front of the Java 5.3.3 broker: the reference for the gRPC answers."""
    proxy = jvm.start_java_proxy("5.3.3", tmp_path_factory.mktemp("auth5-proxy"), java_side.cluster.ns_addr,
                                 props=PROXY_AUTH)
    try:
        yield f"{client_host.host_ip}:{proxy.port}"
    finally:
        proxy.kill9()


def grpc_probes(side: Side, endpoint: str, receives: bool = True) -> dict[str, tuple]:
    """The official Python client against ``endpoint`` as several users: per probe its exit code,
    what it raised, how many messages it sent or received, and the refusal its log shows
    (``receives``: the allowed receives too, not only the refused one)."""
    for topic in ("grpcSuper", "preGrpc", "preD"):
        assert "success" in side.admin(SUPER, "updateTopic", "-t", topic, "-r", "2", "-w", "2")
    side.admin(SUPER, "createUser", "-u", "gina", "-p", "ginapass1")  # removed at the end
    side.admin(SUPER, "createAcl", "-s", "User:gina", "-r", "Topic:preGrpc,Group:groupG", "-a", "Sub", "-d", "Allow")
    g = grpcpy.PyGrpc(side.host, endpoint, side.cluster.ns_addr)
    results: dict[str, jvm.Events] = {}

    def as_(name: str, ak: str, sk: str, command: str, topic: str, *args: str) -> None:
        results[name] = g.client(command, topic, *args, "--credentials", f"{ak}:{sk}", check=False)

    try:
        grpcpy.concurrently(lambda: as_("super", SUPER, SUPER_PW, "produce", "grpcSuper", "3"),
                            lambda: as_("alice", ALICE, ALICE_PW, "produce", "preGrpc", "3"),
                            lambda: as_("gina", "gina", "ginapass1", "produce", "preGrpc", "1"),
                            lambda: as_("alice/preD", ALICE, ALICE_PW, "produce", "preD", "1"),
                            lambda: as_("forger", ALICE, "wrongsecret", "produce", "preGrpc", "1"),
                            lambda: as_("anon", "", "", "produce", "preGrpc", "1"))
        allowed = [
            lambda: as_("super/receive", SUPER, SUPER_PW, "receive", "grpcSuper", "grpc_super_group", "3", "20"),
            lambda: as_("gina/receive", "gina", "ginapass1", "receive", "preGrpc", "groupG", "3", "20"),
            lambda: as_("alice/receive", ALICE, ALICE_PW, "receive", "preGrpc", "groupA", "3", "20")]
        grpcpy.concurrently(
            *(allowed if receives else []),
            lambda: as_("alice/groupB", ALICE, ALICE_PW, "receive", "preGrpc", "groupB", "1", "20", "--wait", "5"))
    finally:
        side.admin(SUPER, "deleteUser", "-u", "gina")
    sent = {who: sorted(r["msgId"] for r in results[who].of("sent")) for who in ("super", "alice")}
    out = {}
    for who, events in results.items():
        errors = events.of("error")
        mine = "super" if who.startswith("super") else "alice"
        got = sorted(r["msgId"] for r in events.of("received"))
        out[who] = (events.returncode, errors[0]["error"] if errors else None,
                    len(events.of("sent")) or len(got), got == sent[mine] if got else None,
                    sorted({line.split(" 40100, ", 1)[1] for line in events.stderr.splitlines() if " 40100, " in line}))
    return out


def test_grpc_official_python_client_with_credentials(rmqpy_side, java_side, java_grpc_endpoint, client_host):
    """The official Python client over rmqpy's gRPC endpoint and over Apache's proxy in front of the
    Java broker, signing with its credentials: the Super user, alice (Topic:pre*, Group:groupA
    Pub/Sub) and gina (Sub only) send or receive each message once; gina's send, alice's route to
    Topic:preD (Deny) and receive in Group:groupB, a wrong secret and a client without credentials
    are refused with UNAUTHORIZED (40100) and Java's reasons; both answer alike."""
    # the reference's allowed receives are not run: through this proxy in front of the Java broker
    # they got nothing within 60 s (not understood yet; without authentication they do, see
    # test_proxy_grpc_python.py), so the comparison is of the sends and the refusals
    ours, theirs = both(lambda job: grpc_probes(*job), (rmqpy_side, rmqpy_side.grpc_endpoint, True),
                        (java_side, java_grpc_endpoint, False))
    print("rmqpy", ours, "\njava", theirs)
    ip = client_host.client_ip
    assert ours["super"][:3] == ours["alice"][:3] == (0, None, 3), ours
    for who in ("super/receive", "alice/receive", "gina/receive"):
        assert ours[who][:4] == (0, None, 3, True), (who, ours[who])
    # a refused send or receive: the client raises UnauthorizedException(code 40100, the reason)
    assert ours["gina"][:2] == (1, f"UnauthorizedException: 40100, User:gina has no permission to access "
                                   f"Topic:preGrpc from {ip}, no matched policies."), ours["gina"]
    assert ours["alice/groupB"][1:3] == (f"UnauthorizedException: 40100, User:{ALICE} has no permission to "
                                         f"access Group:groupB from {ip}, no matched policies.", 0), ours
    # a refused route query: the client logs the reason and fails to start
    for who, reason in (("alice/preD", f"User:{ALICE} has no permission to access Topic:preD from {ip}, "
                                       "the decision is deny."),
                        ("forger", "check signature failed."), ("anon", "username cannot be null.")):
        assert ours[who][0] == 1 and "failed to fetch topic" in ours[who][1], (who, ours[who])
        assert reason in ours[who][4], (who, ours[who])
    # the exit code aside: after a refused receive the client sometimes exits 0 (seen once, with Java)
    assert {who: probe[1:] for who, probe in ours.items() if who in theirs} == \
        {who: probe[1:] for who, probe in theirs.items()}


def test_copy_user_and_acl_between_java_and_rmqpy(rmqpy_side, java_side, client_host):
    """mqadmin copyUser/copyAcl read from one broker and create on the other: a user and its ACL
    made on Java land on rmqpy as they were, and one made on rmqpy lands on Java."""
    def make(side: Side, name: str) -> None:
        side.admin(SUPER, "createUser", "-u", name, "-p", f"{name}pass1")
        side.admin(SUPER, "createAcl", "-s", f"User:{name}", "-r", "Topic:topicA,Group:*", "-a", "Sub",
                   "-i", "10.0.0.0/8", "-d", "Allow")
    both(lambda pair: make(*pair), (java_side, "carol"), (rmqpy_side, "dave"))
    home = rmqpy_side.admin.homes[SUPER]
    java_addr, our_addr = java_side.cluster.broker_addr, rmqpy_side.cluster.broker_addr

    def copy(job: tuple[str, str, str]) -> None:
        name, src, dst = job
        out = mqadmin(client_host, home, ["copyUser", "-n", rmqpy_side.cluster.ns_addr, "-f", src, "-t", dst,
                                          "-u", name])
        out += mqadmin(client_host, home, ["copyAcl", "-n", rmqpy_side.cluster.ns_addr, "-f", src, "-t", dst,
                                           "-s", f"User:{name}"])
        assert f"copy user of {name} from {src} to {dst} success." in out, out
        assert f"copy acl of User:{name} from {src} to {dst} success." in out, out
    both(copy, ("carol", java_addr, our_addr), ("dave", our_addr, java_addr))
    ours, theirs = both(lambda side: [side.admin(SUPER, "getUser", "-u", n) for n in ("carol", "dave")]
                        + [side.admin(SUPER, "getAcl", "-s", f"User:{n}") for n in ("carol", "dave")],
                        rmqpy_side, java_side)
    assert ours == theirs
    assert "carolpass1" in ours[0] and "10.0.0.0/8" in ours[2] and "Group:*" in ours[3], ours


def changes(side: Side) -> tuple[list[str], dict[str, tuple]]:
    """Disable alice (her send is refused), enable her again, delete an ACL entry and bob."""
    admin = side.admin
    out = [admin(SUPER, "updateUser", "-u", ALICE, "-s", "disable")]
    disabled = side.matrix(VERSIONS[-1], ["alice/send:topicA"])
    out += [admin(SUPER, "updateUser", "-u", ALICE, "-s", "enable"),
            admin(SUPER, "deleteAcl", "-s", f"User:{ALICE}", "-r", "Topic:topicD"),
            admin(SUPER, "deleteUser", "-u", BOB),
            *inspect(admin, full=False)]
    return out, disabled


def test_update_delete_and_restart(rmqpy_side, java_side, client_host):
    (ours, ours_disabled), (theirs, theirs_disabled) = both(changes, rmqpy_side, java_side)
    assert ours == theirs
    assert ours_disabled == theirs_disabled
    assert ours_disabled["alice/send:topicA"][1:] == (16, f"User:{ALICE} is disabled.")
    assert BOB not in ours[-2] and "Topic:topicD" not in ours[-1] and "Topic:preD" in ours[-1], ours
    # rmqpy's users and ACLs survive a restart (config/auth.json)
    broker = rmqpy_side.cluster.broker
    broker.stop()
    broker.start()
    assert inspect(rmqpy_side.admin, full=False) == ours[-2:]
    after = rmqpy_side.matrix(VERSIONS[-1], ["alice/send:topicA", "alice/send:topicD", "bob/send:topicA"])
    assert after["alice/send:topicA"][0] is True, after
    assert after["alice/send:topicD"][1:] == (16, f"User:{ALICE} has no permission to access Topic:topicD from "
                                                  f"{client_host.client_ip}, no matched policies."), after
    assert after["bob/send:topicA"][1:] == (16, f"User:{BOB} is not found."), after
