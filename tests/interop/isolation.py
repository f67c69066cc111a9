"""Network isolation for the interop suite.

Every official RocketMQ client (Java, Go, mqadmin) that the interop suite
drives runs on a *client host* of its own: a Linux network namespace with a
veth pair to the host.  Our name server and broker run on the host, and the
namespace can reach nothing but them.

Topology (one ``HostNetwork`` per test process, a /22 out of
``RMQPY_INTEROP_SUBNET``, default ``10.213.0.0/16``)::

    host                                          namespace rmqpy-<pid>-<n>
    ----                                          -------------------------
    rq<pid>n<k>  (port-less bridge, "anchor")
        host_ip   10.213.B.1/32   <-- servers listen / advertise here
    rq<pid>h<n>  (veth) gateway_ip 10.213.B.(4n+1)/30 <==> eth0  client_ip 10.213.B.(4n+2)/30
                                                        lo    127.0.0.1 (its own)
                                                  routes: the /30, host_ip via gateway_ip

* ``host_ip`` is the same for every ClientHost of one HostNetwork, so a
  broker's single ``brokerIP1`` is reachable from all of them.
* The namespace has no default route: it reaches only the /30 and
  ``host_ip``, i.e. only servers on the host bound to 0.0.0.0 or to
  ``host_ip``.  Its 127.0.0.1 is its own loopback, so a server bound only to
  the host's 127.0.0.1 is *not* reachable (the "wrong brokerIP1" case).
* IPv6 is switched off on the namespace's eth0 (no link-local path to the
  host); the namespace keeps ``::1`` on its own loopback.
* Nothing here enables IP forwarding or NAT, or touches any firewall table:
  ns -> host_ip is local delivery on the host.  ``HostNetwork`` records
  ``ip_forward`` when it starts and ``close()`` reports if anything changed it.

Names carry the owning pid, so a later run removes what a killed run left
behind (``cleanup_stale()``, called when a HostNetwork starts and at exit)
without touching the namespaces of concurrent runs.

Kinds (``RMQPY_INTEROP_ISOLATION``):

* unset or ``netns``: the above.  If it cannot be set up (not root, no
  ``ip``), ``IsolationError`` is raised -- never a silent fallback.
* ``none``: explicit opt-out; clients run on the host over loopback, and
  ``isolation_kind()`` / the report header say ``none``.
* ``external``: the harness itself runs in a container of its own (see
  tests/interop/container/): clients run right here, and the servers are
  *not* started by the suite but are other containers, named by
  ``RMQPY_INTEROP_NAMESRV`` (host:port, required) and
  ``RMQPY_INTEROP_BROKER`` (host:port, optional).  ``external_servers()``
  returns them; fixtures that start servers must use them instead.

Usage::

    from tests.interop.isolation import get_host_network

    net = get_host_network()             # per-process singleton
    start_broker(listen="0.0.0.0", broker_ip1=net.host_ip)
    with net.new_client_host() as ch:
        ch.run(["java", "-jar", "producer.jar", f"{net.host_ip}:9876"], timeout=120)
        proc = ch.popen(["go-consumer", ...], stdout=subprocess.PIPE)

Pytest: ``from tests.interop.isolation import host_network, client_host,
pytest_report_header`` in a conftest.py gives fixtures and the header line.

CLI: ``python -m tests.interop.isolation check|cleanup|kind|image``.
"""

from __future__ import annotations

import atexit
import fcntl
import ipaddress
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from typing import Iterable, Sequence

__all__ = [
    "ENV_ISOLATION",
    "ENV_SUBNET",
    "IsolationError",
    "ClientHost",
    "LoopbackClientHost",
    "HostNetwork",
    "isolation_kind",
    "external_servers",
    "kinds_used",
    "get_host_network",
    "new_client_host",
    "cleanup_stale",
    "describe",
    "report_line",
    "pytest_report_header",
]

ENV_ISOLATION = "RMQPY_INTEROP_ISOLATION"
ENV_SUBNET = "RMQPY_INTEROP_SUBNET"
ENV_NAMESRV = "RMQPY_INTEROP_NAMESRV"
ENV_BROKER = "RMQPY_INTEROP_BROKER"
DEFAULT_SUBNET = "10.213.0.0/16"
BLOCK_PREFIX = 22  # one HostNetwork: 255 /30 client links + the anchor
KNOWN_KINDS = ("netns", "podman", "none", "external")
LOCK_PATH = "/run/lock/rmqpy-interop.lock"
NS_PREFIX = "rmqpy-"

_NS_RE = re.compile(r"^rmqpy-(\d+)-(\d+)$")
_LINK_RE = re.compile(r"^rq(\d+)[nh]\d+$")

_IP = "ip"  # tests may point this elsewhere to simulate a missing iproute2


class IsolationError(RuntimeError):
    """The requested isolation could not be set up (or torn down)."""


# --------------------------------------------------------------------------
# kind selection and reporting

_kinds_used: set[str] = set()


def isolation_kind() -> str:
    """The isolation this run uses, from ``RMQPY_INTEROP_ISOLATION``.

    ``"netns"`` (default), ``"none"`` (explicit opt-out) or ``"external"``
    (harness in a container, servers elsewhere).  Raises IsolationError on
    an unknown value.
    """
    raw = os.environ.get(ENV_ISOLATION, "").strip().lower()
    kind = raw or "netns"
    if kind not in KNOWN_KINDS:
        raise IsolationError(
            f"{ENV_ISOLATION}={raw!r} is not one of {', '.join(KNOWN_KINDS)}"
        )
    return kind


def _split_hostport(value: str, var: str) -> tuple[str, int]:
    host, sep, port = value.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise IsolationError(f"{var}={value!r} is not host:port")
    return host, int(port)


def external_servers() -> dict | None:
    """For kind "external": {"namesrv": (host, port), "broker": (host, port)
    or None}, from RMQPY_INTEROP_NAMESRV / RMQPY_INTEROP_BROKER.  None for
    the other kinds, where the suite starts its own servers on the host."""
    if isolation_kind() != "external":
        return None
    ns = os.environ.get(ENV_NAMESRV, "")
    if not ns:
        raise IsolationError(f"{ENV_ISOLATION}=external needs {ENV_NAMESRV}=host:port "
                             "(the name server container)")
    br = os.environ.get(ENV_BROKER, "")
    return {"namesrv": _split_hostport(ns, ENV_NAMESRV),
            "broker": _split_hostport(br, ENV_BROKER) if br else None}


def kinds_used() -> list[str]:
    """Kinds of ClientHost actually created in this process so far."""
    return sorted(_kinds_used)


def describe() -> dict:
    """Facts for a test report (junit properties, header, logs)."""
    try:
        kind = isolation_kind()
    except IsolationError as e:
        kind = f"invalid ({e})"
    d = {"isolation": kind, "isolation_used": ",".join(kinds_used()) or "-"}
    net = _default_network
    if net is not None and not net.closed:
        d["isolation_host_ip"] = net.host_ip
        if net.kind in ("netns", "podman"):
            d["isolation_block"] = str(net.block)
    return d


def report_line() -> str:
    d = describe()
    line = f"interop isolation: {d['isolation']}"
    if d["isolation"] == "none":
        line += f" (clients on the host over loopback: {ENV_ISOLATION}=none)"
    elif d["isolation"] == "netns":
        line += " (each client in its own network namespace)"
    elif d["isolation"] == "podman":
        line += " (each client in a podman container in its own network namespace)"
    elif d["isolation"] == "external":
        line += (" (harness in its own container; servers "
                 f"{os.environ.get(ENV_NAMESRV, '?')} / {os.environ.get(ENV_BROKER, '-')})")
    return line


def pytest_report_header(config):  # re-exported by a conftest.py
    return report_line()


# --------------------------------------------------------------------------
# small helpers


def _run(argv: Sequence[str], *, check: bool = True, timeout: float = 30,
         input: str | None = None) -> subprocess.CompletedProcess:
    try:
        cp = subprocess.run(list(argv), capture_output=True, text=True,
                            timeout=timeout, input=input)
    except FileNotFoundError as e:
        raise IsolationError(
            f"cannot run {argv[0]!r}: {e}. Network-namespace isolation needs "
            f"iproute2 and root: run tests/interop/setup_host.sh as root, or set "
            f"{ENV_ISOLATION}=none explicitly to run clients on the host."
        ) from e
    if check and cp.returncode != 0:
        raise IsolationError(
            f"{' '.join(argv)} failed (exit {cp.returncode}): "
            f"{(cp.stderr or cp.stdout).strip()}"
        )
    return cp


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return _run([_IP, *args], check=check)


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


def read_ip_forward() -> str | None:
    try:
        with open("/proc/sys/net/ipv4/ip_forward") as f:
            return f.read().strip()
    except OSError:
        return None


def list_netns() -> list[str]:
    cp = _ip("netns", "list", check=False)
    if cp.returncode != 0:
        return []
    return [line.split()[0] for line in cp.stdout.splitlines() if line.strip()]


def list_links() -> list[str]:
    cp = _ip("-o", "link", "show", check=False)
    names = []
    for line in cp.stdout.splitlines():
        # "7: rq123h1@if6: <BROADCAST,...> ..."
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@", 1)[0])
    return names


def _host_ipv4_networks() -> list[ipaddress.IPv4Network]:
    """Networks already in use on the host: interface addresses and routes."""
    nets = []
    cp = _ip("-o", "-4", "addr", "show", check=False)
    for line in cp.stdout.splitlines():
        m = re.search(r"\binet (\S+)", line)
        if m:
            nets.append(ipaddress.ip_interface(m.group(1)).network)
    cp = _ip("-4", "route", "show", "table", "all", check=False)
    for line in cp.stdout.splitlines():
        tok = line.split()
        if not tok:
            continue
        dst = tok[1] if tok[0] in ("local", "broadcast", "unicast", "unreachable",
                                   "blackhole", "prohibit", "throw") and len(tok) > 1 else tok[0]
        if dst == "default":
            continue
        try:
            nets.append(ipaddress.ip_network(dst, strict=False))
        except ValueError:
            pass
    return nets


class _FileLock:
    """Cross-process lock so concurrent runs do not pick the same block."""

    def __init__(self, path: str = LOCK_PATH):
        self.path = path
        self.fd = None

    def __enter__(self):
        d = os.path.dirname(self.path)
        try:
            os.makedirs(d, exist_ok=True)
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            # fall back to a private lock file; still serialises threads
            self.fd = os.open(f"/tmp/rmqpy-interop-{os.getuid()}.lock",
                              os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None


def _kill_pids(pids: Iterable[int], grace: float = 3.0) -> None:
    pids = [p for p in pids if p != os.getpid()]
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if _pid_alive(p) and not _is_zombie(p)]
        if pids:
            time.sleep(0.05)
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _netns_pids(name: str) -> list[int]:
    cp = _ip("netns", "pids", name, check=False)
    return [int(x) for x in cp.stdout.split() if x.isdigit()]


def cleanup_stale(*, include_own: bool = False) -> list[str]:
    """Delete ``rmqpy-*`` namespaces and ``rq*`` links whose owning pid is dead.

    Returns the names removed.  Namespaces of live processes (concurrent
    runs) are left alone; with include_own=True, this process's are removed
    too.
    """
    if shutil.which(_IP) is None and not os.path.exists(_IP):
        return []
    removed = []

    def stale(pid: int) -> bool:
        if pid == os.getpid():
            return include_own
        return not _pid_alive(pid)

    with _FileLock():
        for link in list_links():
            m = _LINK_RE.match(link)
            if m and stale(int(m.group(1))):
                if _ip("link", "del", link, check=False).returncode == 0:
                    removed.append(link)
        for ns in list_netns():
            m = _NS_RE.match(ns)
            if m and stale(int(m.group(1))):
                _kill_pids(_netns_pids(ns))
                if _ip("netns", "del", ns, check=False).returncode == 0:
                    removed.append(ns)
        removed += _podman_cleanup_stale(stale)
    return removed


# --------------------------------------------------------------------------
# client hosts


class _ClientHostBase:
    kind = "?"
    name: str
    host_ip: str
    client_ip: str

    def __init__(self):
        self._procs: "weakref.WeakSet[subprocess.Popen]" = weakref.WeakSet()
        self._closed = False
        self._lock = threading.Lock()

    # subclasses: command(argv) -> list[str]

    def command(self, argv: Sequence[str]) -> list[str]:
        raise NotImplementedError

    def popen(self, argv: Sequence[str], **kw) -> subprocess.Popen:
        """subprocess.Popen(argv) inside this client host; env/cwd preserved
        (or as given in kw).  The process is killed at close() if still running."""
        if self._closed:
            raise IsolationError(f"{self.name} is closed")
        p = subprocess.Popen(self.command(argv), **kw)
        self._procs.add(p)
        return p

    def run(self, argv: Sequence[str], timeout: float | None = None, *,
            check: bool = False, capture_output: bool = True, text: bool = True,
            **kw) -> subprocess.CompletedProcess:
        """subprocess.run(argv) inside this client host (output captured,
        text mode by default).  The child is killed on timeout."""
        if self._closed:
            raise IsolationError(f"{self.name} is closed")
        return subprocess.run(self.command(argv), timeout=timeout, check=check,
                              capture_output=capture_output, text=text, **kw)

    def _kill_own(self):
        for p in list(self._procs):
            if p.poll() is None:
                try:
                    p.kill()
                except OSError:
                    pass
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"<{type(self).__name__} {self.name} client_ip={self.client_ip} "
                f"host_ip={self.host_ip}{' closed' if self._closed else ''}>")


class ClientHost(_ClientHostBase):
    """A network namespace with a veth /30 to the host.

    Attributes: ``name`` (namespace name), ``host_ip`` (where servers on the
    host are reached / what they advertise), ``gateway_ip`` (host end of the
    veth), ``client_ip`` (the namespace's address: the peer address servers
    see), ``veth`` (host-side link name), ``kind == "netns"``.

    Normally made by ``HostNetwork.new_client_host()``; ``ClientHost()``
    alone uses the process-wide default network.
    """

    kind = "netns"

    def __init__(self, network: "HostNetwork | None" = None, *, _index: int | None = None):
        super().__init__()
        if network is None:
            network = get_host_network()
            if network.kind != "netns":
                raise IsolationError("ClientHost() needs netns isolation; "
                                     "use new_client_host() to honour "
                                     f"{ENV_ISOLATION}")
        if _index is None:
            _index = network._take_index()
            own_index = True
        else:
            own_index = False
        self.network = network
        self.index = _index
        self.name = f"{NS_PREFIX}{os.getpid()}-{_index}"
        self.veth = f"rq{os.getpid()}h{_index}"
        sub = network.link_subnet(_index)
        self.subnet = sub
        self.gateway_ip = str(sub.network_address + 1)
        self.client_ip = str(sub.network_address + 2)
        self.host_ip = network.host_ip
        try:
            self._create()
        except BaseException:
            self._destroy()
            if own_index:
                network._release_index(_index)
            raise
        network._register(self)
        _kinds_used.add(self.kind)

    def _create(self):
        plen = self.subnet.prefixlen
        _ip("netns", "add", self.name)
        _ip("link", "add", self.veth, "type", "veth",
            "peer", "name", "eth0", "netns", self.name)
        # no IPv6 on the link: the namespace must not reach the host by a
        # link-local address either.  Per-interface sysctls of our own links.
        _write_sysctl(f"/proc/sys/net/ipv6/conf/{self.veth}/disable_ipv6", "1")
        _ip("addr", "add", f"{self.gateway_ip}/{plen}", "dev", self.veth)
        _ip("link", "set", self.veth, "up")
        _ip("netns", "exec", self.name, "sh", "-c",
            "echo 1 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6 || true")
        _ip("-n", self.name, "link", "set", "lo", "up")
        _ip("-n", self.name, "addr", "add", f"{self.client_ip}/{plen}", "dev", "eth0")
        _ip("-n", self.name, "link", "set", "eth0", "up")
        _ip("-n", self.name, "route", "add", f"{self.host_ip}/32", "via", self.gateway_ip,
            "dev", "eth0", "src", self.client_ip)

    def command(self, argv: Sequence[str]) -> list[str]:
        """The argv that runs ``argv`` inside this namespace (for callers
        that spawn processes themselves, e.g. reactor.spawnProcess)."""
        if isinstance(argv, (str, bytes)):
            raise TypeError("argv must be a sequence, not a string")
        return [_IP, "netns", "exec", self.name, *argv]

    def pids(self) -> list[int]:
        """Pids of processes currently in the namespace."""
        return _netns_pids(self.name)

    def _destroy(self):
        if self.name in list_netns():
            _kill_pids(_netns_pids(self.name))
        # delete the veth explicitly: namespace teardown is asynchronous
        # and a process still inside would keep the pair alive.
        _ip("link", "del", self.veth, check=False)
        _ip("netns", "del", self.name, check=False)

    def close(self) -> None:
        """Kill what still runs inside, delete the veth and the namespace.
        Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._kill_own()
            self._destroy()
        finally:
            self.network._unregister(self)
        left = [n for n in (self.name,) if n in list_netns()]
        left += [n for n in (self.veth,) if n in list_links()]
        if left:
            raise IsolationError(f"could not remove {', '.join(left)}")


# --------------------------------------------------------------------------
# podman: a ClientHost whose commands run in containers joined to its netns

DEFAULT_PODMAN_DIR = "/var/lib/rmqpy-interop/podman"
PODMAN_DIR = os.environ.get("RMQPY_INTEROP_PODMAN_DIR", DEFAULT_PODMAN_DIR)
PODMAN_IMAGE = "localhost/rmqpy-interop-client:bookworm"
ENV_PODMAN_MOUNTS = "RMQPY_INTEROP_PODMAN_MOUNTS"
# packages the client image gets beyond debootstrap's minbase: shared libs
# that a host Python's extension modules and a host JDK link against, and ip
IMAGE_PACKAGES = ("iproute2,ca-certificates,libssl3,libffi8,libsqlite3-0,zlib1g,"
                  "libbz2-1.0,liblzma5,libreadline8,libncursesw6,libuuid1,libgdbm6,"
                  "libexpat1,libfreetype6,fontconfig-config")
_CONTAINERS_CONF = """\
# written by tests/interop/isolation.py; used only through CONTAINERS_CONF
[containers]
# the default nofile/nproc limits exceed this machine's hard limits
default_ulimits = ["nofile=16384:16384", "nproc=4096:4096"]
init_path = "/usr/libexec/podman/catatonit"
[engine]
# crun fails here; runc works
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""
_STORAGE_CONF = """\
# written by tests/interop/isolation.py; used only through CONTAINERS_STORAGE_CONF
[storage]
driver = "overlay"
graphroot = "{dir}/storage"
runroot = "{run}"
"""
_CTR_RE = re.compile(r"^rmqpy-(\d+)-\d+-c\d+$")


def _podman_env() -> dict:
    return dict(os.environ,
                CONTAINERS_CONF=os.path.join(PODMAN_DIR, "containers.conf"),
                CONTAINERS_STORAGE_CONF=os.path.join(PODMAN_DIR, "storage.conf"))


def podman_base() -> list[str]:
    """argv prefix for podman with the suite's own configuration (no global
    /etc/containers change): runc, cgroupfs, lower ulimits, own storage."""
    return ["env", f"CONTAINERS_CONF={os.path.join(PODMAN_DIR, 'containers.conf')}",
            f"CONTAINERS_STORAGE_CONF={os.path.join(PODMAN_DIR, 'storage.conf')}",
            "podman"]


def _podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return _run([*podman_base(), *args], check=check, timeout=timeout)


def podman_runroot() -> str:
    """The storage runroot for PODMAN_DIR: the default dir keeps the one its
    image was made with; any other RMQPY_INTEROP_PODMAN_DIR (e.g. a scratch one
    to time a fresh image build) gets its own, since a runroot records the
    mounts of one graphroot's layers.  Kept short: podman's `container
    cleanup` (run by conmon when a container exits) refuses a runroot longer
    than 50 characters, and then every `podman run` waits 20 s for the exit."""
    if os.path.abspath(PODMAN_DIR) == DEFAULT_PODMAN_DIR:
        return "/run/rmqpy-interop/podman"
    import hashlib
    tag = hashlib.sha1(os.path.abspath(PODMAN_DIR).encode()).hexdigest()[:12]
    return f"/run/rmqpy-interop/podman-{tag}"


def write_podman_config() -> None:
    os.makedirs(PODMAN_DIR, exist_ok=True)
    run = podman_runroot()
    for name, text in (("containers.conf", _CONTAINERS_CONF),
                       ("storage.conf", _STORAGE_CONF.format(dir=PODMAN_DIR, run=run))):
        path = os.path.join(PODMAN_DIR, name)
        try:
            with open(path) as f:
                if f.read() == text:
                    continue
        except OSError:
            pass
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)


def ensure_podman_image(*, build: bool = True, mirror: str = "http://deb.debian.org/debian",
                        suite: str = "bookworm") -> str:
    """Make sure the local client image exists; build it with debootstrap
    (Debian's archive) + ``podman import`` if not.  No registry is used."""
    if shutil.which("podman") is None:
        raise IsolationError(
            f"{ENV_ISOLATION}=podman needs podman, runc, catatonit and debootstrap: "
            "run RMQPY_INTEROP_ISOLATION=podman tests/interop/setup_host.sh as root")
    write_podman_config()
    if _podman("image", "exists", PODMAN_IMAGE, check=False).returncode == 0:
        return PODMAN_IMAGE
    if not build:
        raise IsolationError(f"podman image {PODMAN_IMAGE} is missing: run "
                             "RMQPY_INTEROP_ISOLATION=podman tests/interop/setup_host.sh")
    if shutil.which("debootstrap") is None:
        raise IsolationError("debootstrap is missing: run "
                             "RMQPY_INTEROP_ISOLATION=podman tests/interop/setup_host.sh")
    root = os.path.join(PODMAN_DIR, f"rootfs.{os.getpid()}")
    try:
        _run(["debootstrap", "--variant=minbase", f"--include={IMAGE_PACKAGES}",
              suite, root, mirror], timeout=1800)
        for d in ("var/cache/apt/archives", "var/lib/apt/lists"):
            _run(["find", os.path.join(root, d), "-type", "f", "-delete"], check=False)
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        cp = subprocess.run([*podman_base(), "import", "-", PODMAN_IMAGE], stdin=tar.stdout,
                            capture_output=True, text=True, timeout=600)
        tar.stdout.close()
        tar.wait()
        if cp.returncode != 0 or tar.returncode != 0:
            raise IsolationError(f"podman import failed: {cp.stderr.strip()}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return PODMAN_IMAGE


def _podman_cleanup_stale(stale) -> list[str]:
    if shutil.which("podman") is None or not os.path.exists(
            os.path.join(PODMAN_DIR, "storage.conf")):
        return []
    cp = _podman("ps", "-a", "--format", "{{.Names}}", check=False, timeout=60)
    dead = [n for n in cp.stdout.split()
            if (m := _CTR_RE.match(n)) and stale(int(m.group(1)))]
    if dead:
        _podman("rm", "-f", "-t", "0", *dead, check=False, timeout=120)
    return dead


class _PodmanPopen(subprocess.Popen):
    """Popen of ``podman run``: signals go to the container's process
    (``podman kill``), so kill()/terminate() and run()'s timeout work."""

    container: str = ""

    def send_signal(self, sig):
        if self.poll() is None and self.container:
            subprocess.run([*podman_base(), "kill", "--signal", str(int(sig)), self.container],
                           capture_output=True, timeout=60)
        super().send_signal(sig)


def _covered(path: str, mounts: Iterable[str]) -> bool:
    return any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts)


_jdk_dirs_cache: dict[str, frozenset] = {}


def _jdk_link_dirs(home: str) -> frozenset:
    """Directories outside a JDK that its absolute symlinks point into
    (Debian's JDKs link conf and security files to /etc/java-N-openjdk,
    cacerts to /etc/ssl/certs/java)."""
    if home not in _jdk_dirs_cache:
        dirs = set()
        for root, dnames, fnames in os.walk(home):
            for n in dnames + fnames:
                p = os.path.join(root, n)
                if os.path.islink(p):
                    t = os.readlink(p)
                    if os.path.isabs(t) and not _covered(t, [home]):
                        dirs.add(os.path.dirname(t))
        _jdk_dirs_cache[home] = frozenset(dirs)
    return _jdk_dirs_cache[home]


class PodmanClientHost(ClientHost):
    """A ClientHost (same namespace, addresses and routes as ``netns``)
    whose commands each run in a podman container joined to that namespace
    (``--network ns:``; podman's own network layer is not used, so no
    firewall table or forwarding setting is touched).

    The image is a debootstrapped Debian (``PODMAN_IMAGE``).  Mounted at the
    same paths: the repository (rw), /tmp (rw), the cwd (rw), the host's
    JDKs (/usr/lib/jvm and the JDK of ``java`` on PATH, ro), this Python's
    prefix (ro), and whatever ``RMQPY_INTEROP_PODMAN_MOUNTS`` lists
    (os.pathsep-separated).  env is passed through; PATH is prefixed with
    the JDK's and Python's bin directories.
    """

    kind = "podman"

    def __init__(self, network: "HostNetwork | None" = None, **kw):
        self.image = ensure_podman_image(build=True)
        self._ctr = itertools.count(1)
        super().__init__(network, **kw)

    @staticmethod
    def _java_home() -> str | None:
        java = shutil.which("java")
        if java is None:
            return None
        return os.path.dirname(os.path.dirname(os.path.realpath(java)))

    def mounts(self, cwd: str | None = None) -> list[tuple[str, str]]:
        repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        ro = {"/usr/lib/jvm", sys.base_prefix, sys.prefix}
        jh = self._java_home()
        if jh:
            ro.add(jh)
            ro |= _jdk_link_dirs(jh)
        rw = {repo, "/tmp"}
        for extra in os.environ.get(ENV_PODMAN_MOUNTS, "").split(os.pathsep):
            if extra:
                rw.add(os.path.abspath(extra))
        cwd = os.path.abspath(cwd or os.getcwd())
        if not _covered(cwd, rw | ro) and cwd != "/":
            rw.add(cwd)
        out = []
        for path in sorted(rw | ro):
            if os.path.exists(path) and not _covered(path, [m for m, _ in out]):
                out.append((path, "rw" if path in rw else "ro"))
        return out

    def command(self, argv: Sequence[str], *, env: dict | None = None,
                cwd: str | None = None, name: str | None = None,
                interactive: bool = True) -> list[str]:
        if isinstance(argv, (str, bytes)):
            raise TypeError("argv must be a sequence, not a string")
        env = dict(os.environ if env is None else env)
        extra_path = [os.path.dirname(sys.executable)]
        jh = self._java_home()
        if jh:
            extra_path.insert(0, os.path.join(jh, "bin"))
        env["PATH"] = os.pathsep.join(extra_path + [env.get("PATH", "/usr/bin:/bin")])
        cwd = os.path.abspath(cwd or os.getcwd())
        cmd = [*podman_base(), "run", "--rm", "--init",
               "--name", name or f"{self.name}-c{next(self._ctr)}",
               "--label", f"rmqpy.owner={self.name}",
               f"--network=ns:/run/netns/{self.name}",
               "--workdir", cwd]
        if interactive:
            cmd.append("-i")
        mounts = self.mounts(cwd)
        for path, mode in mounts:
            cmd += ["-v", f"{path}:{path}:{mode}"]
        argv = list(argv)
        if argv and os.path.isabs(argv[0]) and not _covered(argv[0], [m for m, _ in mounts]):
            # e.g. /usr/bin/java -> /etc/alternatives -> /usr/lib/jvm/.../bin/java
            argv[0] = os.path.realpath(argv[0])
        for k, v in env.items():
            if k in ("HOSTNAME", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF"):
                continue
            cmd += ["--env", f"{k}={v}"]
        return [*cmd, self.image, *argv]

    def popen(self, argv: Sequence[str], **kw) -> subprocess.Popen:
        if self._closed:
            raise IsolationError(f"{self.name} is closed")
        name = f"{self.name}-c{next(self._ctr)}"
        cmd = self.command(argv, env=kw.pop("env", None), cwd=kw.get("cwd"), name=name,
                           interactive=kw.get("stdin") is not None)
        p = _PodmanPopen(cmd, **kw)
        p.container = name
        self._procs.add(p)
        return p

    def run(self, argv: Sequence[str], timeout: float | None = None, *,
            check: bool = False, capture_output: bool = True, text: bool = True,
            input=None, **kw) -> subprocess.CompletedProcess:
        if capture_output:
            kw.setdefault("stdout", subprocess.PIPE)
            kw.setdefault("stderr", subprocess.PIPE)
        if input is not None:
            kw["stdin"] = subprocess.PIPE
        with self.popen(argv, text=text, **kw) as p:
            try:
                out, err = p.communicate(input, timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                raise
        cp = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        if check:
            cp.check_returncode()
        return cp

    def _destroy(self):
        if shutil.which("podman") is not None:
            cp = _podman("ps", "-a", "-q", "--filter", f"label=rmqpy.owner={self.name}",
                         check=False, timeout=60)
            ids = cp.stdout.split()
            if ids:
                _podman("rm", "-f", "-t", "0", *ids, check=False, timeout=120)
        super()._destroy()



class LoopbackClientHost(_ClientHostBase):
    """Runs clients directly where the harness runs.

    ``RMQPY_INTEROP_ISOLATION=none``: on the host; host_ip and client_ip are
    127.0.0.1.  ``external``: in the harness container; host_ip is the name
    server container's address and client_ip this container's own address
    towards it."""

    kind = "none"
    _counter = itertools.count(1)

    def __init__(self, network: "HostNetwork | None" = None, *,
                 kind: str = "none", host_ip: str = "127.0.0.1",
                 client_ip: str = "127.0.0.1"):
        super().__init__()
        self.kind = kind
        self.network = network
        self.name = f"{'loopback' if kind == 'none' else kind}-{os.getpid()}-{next(self._counter)}"
        self.host_ip = host_ip
        self.gateway_ip = host_ip
        self.client_ip = client_ip
        _kinds_used.add(kind)
        if network is not None:
            network._register(self)

    def command(self, argv: Sequence[str]) -> list[str]:
        if isinstance(argv, (str, bytes)):
            raise TypeError("argv must be a sequence, not a string")
        return list(argv)

    def pids(self) -> list[int]:
        return [p.pid for p in list(self._procs) if p.poll() is None]

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._kill_own()
        if self.network is not None:
            self.network._unregister(self)


def _write_sysctl(path: str, value: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError:
        pass  # IPv6 disabled in the kernel: nothing to switch off


# --------------------------------------------------------------------------
# the host side


class HostNetwork:
    """The host side of the isolation for one test process.

    ``kind``: "netns", "none" or "external" (default: ``isolation_kind()``).
    ``host_ip``: the address servers on the host listen on (or bind 0.0.0.0)
    and advertise (brokerIP1, name server address) to every ClientHost; for
    "external", the name server container's address.
    ``new_client_host()`` makes a ClientHost (LoopbackClientHost for "none"
    and "external").
    ``close()`` closes every client host and removes the anchor link.
    """

    _counter = itertools.count(0)

    def __init__(self, kind: str | None = None, *, subnet: str | None = None,
                 cleanup: bool = True):
        self.kind = kind or isolation_kind()
        if self.kind not in KNOWN_KINDS:
            raise IsolationError(f"unknown isolation kind {self.kind!r}")
        self.closed = False
        self._lock = threading.Lock()
        self._hosts: dict[str, _ClientHostBase] = {}
        self._free: list[int] = []
        self._next = 1
        self.ip_forward_at_start = read_ip_forward()
        self.block = None
        self.anchor = None
        self.client_ip = "127.0.0.1"
        if self.kind == "none":
            self.host_ip = "127.0.0.1"
            return
        if self.kind == "external":
            host, port = external_servers()["namesrv"]
            try:
                self.host_ip = socket.gethostbyname(host)
                # which local address routes there (a UDP connect sends nothing)
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                    u.connect((self.host_ip, port))
                    self.client_ip = u.getsockname()[0]
            except OSError as e:
                raise IsolationError(f"{ENV_NAMESRV}={host}:{port}: {e}") from e
            return
        if os.geteuid() != 0:
            raise IsolationError(
                "network-namespace isolation needs root (CAP_NET_ADMIN and "
                "CAP_SYS_ADMIN): run the interop suite as root after "
                "tests/interop/setup_host.sh, or set "
                f"{ENV_ISOLATION}=none explicitly to run clients on the host "
                "over loopback.")
        if shutil.which(_IP) is None:
            raise IsolationError(
                "iproute2's `ip` is not installed: run tests/interop/setup_host.sh "
                f"as root, or set {ENV_ISOLATION}=none explicitly.")
        if self.kind == "podman":
            ensure_podman_image(build=True)
        if cleanup:
            cleanup_stale()
        self.anchor = f"rq{os.getpid()}n{next(self._counter)}"
        base = ipaddress.ip_network(subnet or os.environ.get(ENV_SUBNET) or DEFAULT_SUBNET)
        if base.version != 4 or base.prefixlen > BLOCK_PREFIX:
            raise IsolationError(f"{ENV_SUBNET}={base} must be an IPv4 network "
                                 f"of /{BLOCK_PREFIX} or larger")
        with _FileLock():
            self.block = self._pick_block(base)
            self.host_ip = str(self.block.network_address + 1)
            try:
                _ip("link", "add", self.anchor, "type", "bridge")
                _ip("addr", "add", f"{self.host_ip}/32", "dev", self.anchor)
                _ip("link", "set", self.anchor, "up")
            except IsolationError as e:
                _ip("link", "del", self.anchor, check=False)
                raise IsolationError(
                    f"cannot set up the host side of the isolation: {e}. Run "
                    "tests/interop/setup_host.sh as root, or set "
                    f"{ENV_ISOLATION}=none explicitly.") from e
        atexit.register(self._atexit)

    @staticmethod
    def _pick_block(base: ipaddress.IPv4Network) -> ipaddress.IPv4Network:
        blocks = list(base.subnets(new_prefix=BLOCK_PREFIX))
        used = _host_ipv4_networks()
        start = os.getpid() % len(blocks)
        for i in range(len(blocks)):
            b = blocks[(start + i) % len(blocks)]
            if not any(b.overlaps(u) for u in used if u.prefixlen > 0):
                return b
        raise IsolationError(f"no free /{BLOCK_PREFIX} left in {base} "
                             f"(set {ENV_SUBNET} to another range)")

    def link_subnet(self, index: int) -> ipaddress.IPv4Network:
        return ipaddress.ip_network(
            f"{self.block.network_address + 4 * index}/30")

    def _take_index(self) -> int:
        with self._lock:
            if self.closed:
                raise IsolationError("HostNetwork is closed")
            if self._free:
                return self._free.pop(0)
            n = self._next
            if 4 * (n + 1) > self.block.num_addresses:
                raise IsolationError(f"more than {n - 1} client hosts open at once")
            self._next += 1
            return n

    def _release_index(self, index: int) -> None:
        with self._lock:
            self._free.append(index)

    def _register(self, host):
        with self._lock:
            self._hosts[host.name] = host

    def _unregister(self, host):
        with self._lock:
            if self._hosts.pop(host.name, None) is not None and host.kind == "netns":
                self._free.append(host.index)

    @property
    def client_hosts(self) -> list[_ClientHostBase]:
        with self._lock:
            return list(self._hosts.values())

    def new_client_host(self) -> _ClientHostBase:
        if self.kind in ("none", "external"):
            return LoopbackClientHost(self, kind=self.kind, host_ip=self.host_ip,
                                      client_ip=self.client_ip)
        if self.kind == "podman":
            return PodmanClientHost(self)
        return ClientHost(self)

    def close(self) -> None:
        """Close all client hosts, remove the anchor; idempotent.  Raises
        IsolationError if ip_forward changed while we ran (we never touch it;
        something else did)."""
        if self.closed:
            return
        errors = []
        for h in self.client_hosts:
            try:
                h.close()
            except IsolationError as e:
                errors.append(str(e))
        self.closed = True
        if self.anchor:
            _ip("link", "del", self.anchor, check=False)
        if errors:
            raise IsolationError("; ".join(errors))
        now = read_ip_forward()
        if self.ip_forward_at_start is not None and now != self.ip_forward_at_start:
            raise IsolationError(
                f"net.ipv4.ip_forward changed during the run "
                f"({self.ip_forward_at_start} -> {now}); the isolation never "
                "writes it, so something else did")

    def _atexit(self):
        try:
            self.close()
        except Exception as e:  # noqa: BLE001 - best effort at exit
            print(f"rmqpy isolation cleanup: {e}", file=sys.stderr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<HostNetwork kind={self.kind} host_ip={self.host_ip} block={self.block}>"


_default_network: HostNetwork | None = None
_default_lock = threading.Lock()


def get_host_network() -> HostNetwork:
    """The process-wide HostNetwork of kind ``isolation_kind()``; made on
    first use, closed at exit."""
    global _default_network
    with _default_lock:
        if _default_network is None or _default_network.closed:
            _default_network = HostNetwork()
        return _default_network


def new_client_host() -> _ClientHostBase:
    return get_host_network().new_client_host()


# --------------------------------------------------------------------------
# pytest fixtures (import them into a conftest.py)

try:
    import pytest as _pytest
except ImportError:  # pragma: no cover - library use without pytest
    _pytest = None

if _pytest is not None:

    @_pytest.fixture(scope="session")
    def host_network():
        """Session HostNetwork; fails (never skips) if isolation cannot be set up."""
        net = get_host_network()
        yield net
        net.close()

    @_pytest.fixture
    def client_host(host_network, record_property):
        """A fresh ClientHost per test, closed afterwards; records the kind."""
        record_property("isolation", host_network.kind)
        with host_network.new_client_host() as ch:
            yield ch


# --------------------------------------------------------------------------
# CLI


def _main(argv: list[str]) -> int:
    cmd = argv[0] if argv else "check"
    if cmd == "kind":
        print(isolation_kind())
        return 0
    if cmd == "image":
        print(ensure_podman_image(build=True))
        return 0
    if cmd == "cleanup":
        for n in cleanup_stale():
            print(f"removed {n}")
        return 0
    if cmd == "check":
        with HostNetwork() as net, net.new_client_host() as ch:
            cp = ch.run(["ip", "-4", "-o", "addr", "show"] if net.kind == "netns"
                        else ["true"], timeout=30)
            print(f"isolation {net.kind}: host_ip={net.host_ip} "
                  f"client {ch.name} client_ip={ch.client_ip}")
            if cp.returncode != 0:
                print(cp.stderr, file=sys.stderr)
                return 1
        return 0
    print("usage: python -m tests.interop.isolation [check|cleanup|kind|image]",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
