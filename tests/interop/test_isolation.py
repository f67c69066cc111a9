"""Checks of the interop suite's isolation layer (tests/interop/isolation.py).

A TCP echo server on the host; clients inside ClientHosts reach it at
host_ip, show up with their own client_ip as the peer address (what a
RocketMQ broker records as born host), cannot reach the host's 127.0.0.1,
and leave nothing behind.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading

import pytest

from tests.interop import isolation
from tests.interop.isolation import (
    ClientHost,
    HostNetwork,
    IsolationError,
    LoopbackClientHost,
    cleanup_stale,
    list_links,
    list_netns,
)

pytestmark = pytest.mark.interop

KIND = isolation.isolation_kind()
NS_KINDS = ("netns", "podman")  # kinds with a network namespace per client host
netns_only = pytest.mark.skipif(
    KIND not in NS_KINDS,
    reason=f"{isolation.ENV_ISOLATION}={KIND}: namespace checks do not apply")
# with "external", host_ip is the name server container, not this machine
local_servers = pytest.mark.skipif(
    KIND == "external",
    reason=f"{isolation.ENV_ISOLATION}=external: servers are not on this machine")


class EchoServer:
    """Plain-socket TCP echo server in a thread; records peer addresses."""

    def __init__(self, bind_ip: str):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((bind_ip, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.peers: list[tuple[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            self.peers.append(peer[:2])
            with conn:
                conn.settimeout(5)
                try:
                    while data := conn.recv(4096):
                        conn.sendall(data)
                except OSError:
                    pass

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# Python client run inside a ClientHost: prints JSON with its own address and
# the echoed payload, or the errno name on failure.
CLIENT = textwrap.dedent("""
    import errno, json, socket, sys
    host, port, payload = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
    try:
        s = socket.create_connection((host, port), timeout=3)
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := s.recv(4096):
            got += chunk
        print(json.dumps({"ok": True, "local": s.getsockname()[:2],
                          "echo": got.decode()}))
    except OSError as e:
        print(json.dumps({"ok": False, "error": errno.errorcode.get(e.errno, str(e))}))
""")


def connect_from(ch, host: str, port: int, payload: str = "ping") -> dict:
    cp = ch.run([sys.executable, "-c", CLIENT, host, str(port), payload], timeout=30)
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)


@pytest.fixture(scope="module")
def net():
    n = HostNetwork()  # fails clearly (IsolationError) if netns cannot be set up
    yield n
    n.close()


@pytest.fixture
def ch(net, record_property):
    record_property("isolation", net.kind)
    with net.new_client_host() as h:
        yield h


def test_isolation_kind_is_recorded(net, record_property, record_testsuite_property):
    assert net.kind == KIND
    assert KIND in ("netns", "podman", "none", "external")
    record_property("isolation", KIND)
    record_testsuite_property("isolation", KIND)
    assert isolation.report_line().startswith(f"interop isolation: {KIND}")
    assert isolation.describe()["isolation"] == KIND


@local_servers
def test_echo_from_client_host_and_peer_address(net, ch):
    with EchoServer("0.0.0.0") as srv:
        r = connect_from(ch, ch.host_ip, srv.port, "hello rocketmq")
    assert r["ok"], r
    assert r["echo"] == "hello rocketmq"
    assert r["local"][0] == ch.client_ip
    # the server sees the client host's own address (broker's born host)
    assert srv.peers and srv.peers[0][0] == ch.client_ip
    if net.kind in NS_KINDS:
        assert ch.client_ip != ch.host_ip
        assert ch.client_ip != "127.0.0.1"


@netns_only
def test_server_bound_to_host_ip_only(net, ch):
    with EchoServer(net.host_ip) as srv:
        r = connect_from(ch, net.host_ip, srv.port)
    assert r["ok"], r
    assert srv.peers[0][0] == ch.client_ip


@netns_only
def test_two_client_hosts_get_distinct_addresses(net):
    with net.new_client_host() as a, net.new_client_host() as b:
        assert a.name != b.name
        assert a.client_ip != b.client_ip
        assert a.gateway_ip != b.gateway_ip
        # one broker address for all of them (a single brokerIP1)
        assert a.host_ip == b.host_ip == net.host_ip
        with EchoServer("0.0.0.0") as srv:
            ra = connect_from(a, net.host_ip, srv.port, "a")
            rb = connect_from(b, net.host_ip, srv.port, "b")
        assert ra["ok"] and rb["ok"], (ra, rb)
        assert ra["echo"] == "a" and rb["echo"] == "b"
        assert [p[0] for p in srv.peers] == [a.client_ip, b.client_ip]
        # client hosts do not reach each other: only the host is routed
        with EchoServer("0.0.0.0") as srv:
            ab = connect_from(a, b.client_ip, srv.port)
        assert not ab["ok"] and ab["error"] == "ENETUNREACH", ab


@netns_only
def test_host_loopback_server_is_not_reachable(net, ch):
    """The "wrong brokerIP1" case: a server bound to the host's 127.0.0.1."""
    with EchoServer("127.0.0.1") as srv:
        # sanity: it works on the host itself
        with socket.create_connection(("127.0.0.1", srv.port), timeout=3):
            pass
        via_lo = connect_from(ch, "127.0.0.1", srv.port)
        via_host_ip = connect_from(ch, net.host_ip, srv.port)
    assert not via_lo["ok"] and via_lo["error"] == "ECONNREFUSED", via_lo
    assert not via_host_ip["ok"] and via_host_ip["error"] == "ECONNREFUSED", via_host_ip
    assert len(srv.peers) == 1  # only the host's own sanity connection


@netns_only
def test_namespace_reaches_nothing_else(net, ch):
    # its own links: lo and eth0 only; no default route
    links = ch.run(["ip", "-o", "link", "show"], timeout=10).stdout
    names = sorted(line.split(":")[1].strip().split("@")[0] for line in links.splitlines())
    assert names == ["eth0", "lo"]
    routes = ch.run(["ip", "-4", "route", "show"], timeout=10).stdout
    assert "default" not in routes
    assert f"{net.host_ip} via {ch.gateway_ip}" in routes
    assert ch.run(["ip", "-6", "addr", "show", "dev", "eth0"], timeout=10).stdout.strip() == ""
    # a host address outside our block (e.g. the machine's own uplink
    # address) is not routed from the namespace, even with a listener there
    others = [a for a in _host_ipv4_addrs()
              if not a.startswith("127.") and a not in _block_addrs(net)]
    with EchoServer("0.0.0.0") as srv:
        for addr in others:
            r = connect_from(ch, addr, srv.port)
            assert not r["ok"] and r["error"] == "ENETUNREACH", (addr, r)


def _host_ipv4_addrs() -> list[str]:
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True,
                         text=True, check=True).stdout
    return [line.split()[3].split("/")[0] for line in out.splitlines()]


def _block_addrs(net) -> set[str]:
    return {str(a) for a in net.block}


@netns_only
def test_ip_forward_untouched(net, ch):
    assert isolation.read_ip_forward() == net.ip_forward_at_start


@netns_only
def test_close_leaves_nothing_behind(net):
    h = net.new_client_host()
    name, veth = h.name, h.veth
    assert name in list_netns() and veth in list_links()
    # a long-running process inside is killed at close
    p = h.popen(["sleep", "300"])
    for _ in range(200):
        if h.pids():
            break
        threading.Event().wait(0.05)
    if h.kind == "netns":
        assert p.pid in h.pids()
    else:  # podman: the process is the container's, p is `podman run`
        assert h.pids()
    h.close()
    assert p.poll() is not None
    assert name not in list_netns()
    assert veth not in list_links()
    h.close()  # idempotent
    with pytest.raises(IsolationError):
        h.run(["true"])
    # context manager form
    with net.new_client_host() as h2:
        name2, veth2 = h2.name, h2.veth
    assert name2 not in list_netns() and veth2 not in list_links()
    assert h2.closed


@netns_only
def test_stray_process_inside_is_killed_at_close(net):
    h = net.new_client_host()
    # started by someone else (not via popen): found by `ip netns pids`
    stray = subprocess.Popen(["ip", "netns", "exec", h.name, "sleep", "300"])
    try:
        for _ in range(100):
            if stray.pid in h.pids():
                break
            threading.Event().wait(0.05)
        h.close()
        assert stray.wait(10) is not None
        assert h.name not in list_netns()
    finally:
        if stray.poll() is None:
            stray.kill()


@netns_only
def test_network_close_removes_everything(record_property):
    n = HostNetwork()
    hosts = [n.new_client_host() for _ in range(3)]
    anchor = n.anchor
    assert anchor in list_links()
    n.close()
    assert all(h.closed for h in hosts)
    left_ns = set(list_netns())
    left_links = set(list_links())
    assert not any(h.name in left_ns or h.veth in left_links for h in hosts)
    assert anchor not in left_links
    n.close()  # idempotent


@netns_only
def test_stale_namespaces_of_dead_runs_are_removed(net):
    dead = subprocess.Popen(["true"])
    dead.wait()
    pid = dead.pid  # no longer alive
    ns, veth, anchor = f"rmqpy-{pid}-7", f"rq{pid}h7", f"rq{pid}n0"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    subprocess.run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                    "netns", ns], check=True)
    subprocess.run(["ip", "link", "add", anchor, "type", "bridge"], check=True)
    try:
        removed = cleanup_stale()
        # (a concurrent run's own cleanup may have got there first, so the
        # check is that they are gone, not who removed them)
        assert not any(r.startswith((f"rmqpy-{os.getpid()}-", f"rq{os.getpid()}"))
                       for r in removed)
        assert ns not in list_netns()
        assert veth not in list_links() and anchor not in list_links()
        # our own (live) namespaces are untouched
        assert net.anchor in list_links()
    finally:
        subprocess.run(["ip", "link", "del", veth], capture_output=True)
        subprocess.run(["ip", "link", "del", anchor], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@netns_only
def test_concurrent_networks_do_not_collide(net):
    other = subprocess.run(
        [sys.executable, "-m", "tests.interop.isolation", "check"],
        capture_output=True, text=True, timeout=60,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert other.returncode == 0, other.stderr
    host_ip = other.stdout.split("host_ip=")[1].split()[0]
    assert host_ip != net.host_ip
    import ipaddress
    assert ipaddress.ip_address(host_ip) not in net.block


def test_python_process_runs_inside(ch):
    env = dict(os.environ, RMQPY_ISOLATION_PROBE="42")
    cp = ch.run([sys.executable, "-c",
                 "import os, socket, sys, json;"
                 "print(json.dumps([os.getcwd(), os.environ.get('RMQPY_ISOLATION_PROBE'),"
                 " sys.executable]))"],
                timeout=30, env=env, cwd="/tmp")
    assert cp.returncode == 0, cp.stderr
    cwd, probe, exe = json.loads(cp.stdout)
    assert (cwd, probe, exe) == ("/tmp", "42", sys.executable)
    # popen form, with pipes
    p = ch.popen([sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read().upper())"],
                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    out, _ = p.communicate("abc", timeout=30)
    assert out == "ABC"


JAVA_ECHO = textwrap.dedent("""
    import java.io.*;
    import java.net.*;
    public class Echo {
        public static void main(String[] a) throws Exception {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(a[0], Integer.parseInt(a[1])), 3000);
                s.getOutputStream().write("java".getBytes());
                s.shutdownOutput();
                byte[] buf = s.getInputStream().readAllBytes();
                System.out.println(s.getLocalAddress().getHostAddress() + " " + new String(buf));
            }
        }
    }
""")


def test_java_process_runs_inside(ch, tmp_path):
    java = shutil.which("java")
    if java is None:
        pytest.skip("no `java` on PATH (the interop suite installs a JDK elsewhere)")
    cp = ch.run([java, "-version"], timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert "version" in cp.stderr
    # a JVM socket from inside: source-file mode needs a JDK (jdk.compiler)
    mods = subprocess.run([java, "--list-modules"], capture_output=True, text=True,
                          timeout=60).stdout
    if "jdk.compiler" not in mods or KIND == "external":
        return
    src = tmp_path / "Echo.java"
    src.write_text(JAVA_ECHO)
    with EchoServer("0.0.0.0") as srv:
        cp = ch.run([java, str(src), ch.host_ip, str(srv.port)], timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == [ch.client_ip, "java"]
    assert srv.peers[0][0] == ch.client_ip


def test_none_kind_runs_on_loopback(monkeypatch):
    monkeypatch.setenv(isolation.ENV_ISOLATION, "none")
    assert isolation.isolation_kind() == "none"
    with HostNetwork() as n, n.new_client_host() as h:
        assert isinstance(h, LoopbackClientHost)
        assert n.host_ip == h.host_ip == h.client_ip == "127.0.0.1"
        with EchoServer("127.0.0.1") as srv:
            r = connect_from(h, h.host_ip, srv.port)
        assert r["ok"] and r["local"][0] == "127.0.0.1"
    assert "none" in isolation.kinds_used()


def test_unknown_kind_is_an_error(monkeypatch):
    monkeypatch.setenv(isolation.ENV_ISOLATION, "chroot")
    with pytest.raises(IsolationError, match="RMQPY_INTEROP_ISOLATION"):
        isolation.isolation_kind()


@netns_only
def test_failure_is_loud_not_a_silent_fallback(monkeypatch):
    monkeypatch.setattr(isolation, "_IP", "/nonexistent/ip")
    with pytest.raises(IsolationError, match="RMQPY_INTEROP_ISOLATION=none"):
        HostNetwork(kind="netns")
    monkeypatch.setattr(isolation.os, "geteuid", lambda: 1000)
    with pytest.raises(IsolationError, match="root"):
        HostNetwork(kind="netns")


@netns_only
def test_command_for_custom_spawners(ch):
    argv = ch.command(["echo", "hi"])
    if ch.kind == "netns":
        assert argv[:4] == ["ip", "netns", "exec", ch.name]
    else:
        assert "podman" in argv and f"--network=ns:/run/netns/{ch.name}" in argv
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    assert out == "hi\n"
    with pytest.raises(TypeError):
        ch.command("echo hi")


@pytest.mark.skipif(KIND != "netns", reason=f"{isolation.ENV_ISOLATION}={KIND}")
def test_default_client_host_constructor():
    with ClientHost() as h:
        assert h.network is isolation.get_host_network()
        assert h.host_ip == h.network.host_ip


def test_external_kind_uses_given_servers(monkeypatch):
    monkeypatch.setenv(isolation.ENV_ISOLATION, "external")
    monkeypatch.delenv(isolation.ENV_NAMESRV, raising=False)
    with pytest.raises(IsolationError, match="RMQPY_INTEROP_NAMESRV"):
        HostNetwork()
    monkeypatch.setenv(isolation.ENV_NAMESRV, "localhost:9876")
    monkeypatch.setenv(isolation.ENV_BROKER, "127.0.0.1:10911")
    assert isolation.external_servers() == {"namesrv": ("localhost", 9876),
                                            "broker": ("127.0.0.1", 10911)}
    with HostNetwork() as n, n.new_client_host() as h:
        assert n.kind == h.kind == "external"
        assert h.host_ip == "127.0.0.1" and h.client_ip == "127.0.0.1"
        assert h.run(["true"], timeout=10).returncode == 0
    assert "external" in isolation.report_line()
    monkeypatch.setenv(isolation.ENV_NAMESRV, "no-port")
    with pytest.raises(IsolationError, match="host:port"):
        isolation.external_servers()
    monkeypatch.setenv(isolation.ENV_ISOLATION, "netns")
    assert isolation.external_servers() is None
