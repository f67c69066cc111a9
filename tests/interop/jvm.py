"""Run the official Apache RocketMQ Java programs (and our Java harness).

Plain subprocess helpers, no pytest inside, for the interop tests:

* :func:`ensure_built` runs ``tests/interop/java/build.sh`` (once per process).
* :func:`classpath` / :func:`java_cmd` build ``java`` command lines with the
  JVM options that JDK 17 needs for RocketMQ and small heaps.
* :func:`start_java_namesrv` / :func:`start_java_broker` start the real Java
  NamesrvStartup / BrokerStartup (not runbroker.sh, which fails on JDK 17).
* :func:`mqadmin` runs ``MQAdminStartup``; :func:`harness` and
  :func:`harness_popen` run our harness (``io.rmqpy.interop.harness.Harness``),
  which prints JSON lines.

Versions are the ones of the CLIENT side: ``"4.9.8"`` and ``"5.3.3"``. Apache
never published rocketmq-broker / rocketmq-namesrv 4.9.8 to Maven Central, so
the 4.9.8 *server* is 4.9.7 (:data:`SERVER_VERSIONS`), the newest 4.9 server
there is (4.9.8 only changed a namesrv config-update check and dropped the
ACL-config request codes 50-53).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from tests import ports
from tests.interop import cds

JAVA_DIR = Path(__file__).resolve().parent / "java"
TARGET = JAVA_DIR / "target"
BUILD_SH = JAVA_DIR / "build.sh"
HARNESS_JAR = TARGET / "harness.jar"
#: the 5.x gRPC client harness (java/grpc/), with the client jar it was built against
GRPC_HARNESS_JAR = TARGET / "grpc-harness.jar"
GRPC_CLIENT_VERSION = "5.0.8"  # rocketmq-client-java, java/grpc/pom.xml
GRPC_HARNESS_MAIN = "io.rmqpy.interop.grpc.GrpcHarness"

VERSIONS = ("4.9.8", "5.3.3")
#: versions with only a broker, name server and proxy (no client or tools jars), fetched when
#: asked (:func:`ensure_built`'s ``server_versions``): newer references, such as the gRPC
#: differential harness's (tests/interop/grpc_diff_env.py); not run by the version-matrix tests
SERVER_ONLY_VERSIONS = ("5.4.0",)
#: the broker / name server jars really used for each version
SERVER_VERSIONS = {"4.9.8": "4.9.7", "5.3.3": "5.3.3", "5.4.0": "5.4.0"}

HARNESS_MAIN = "io.rmqpy.interop.harness.Harness"
NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
CONTROLLER_MAIN = "org.apache.rocketmq.controller.ControllerStartup"
MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
#: runs another main class unchanged, minus a 3 s wait in client shutdown
FASTEXIT_MAIN = "io.rmqpy.interop.harness.FastExit"

#: What RocketMQ needs on JDK 17 (strong encapsulation since JDK 16), found
#: by trying:
#: * java.nio + jdk.internal.ref: 4.9's MappedFile.clean() (run whenever a
#:   commit log / consume queue file is released: at every broker shutdown
#:   and when files are deleted) reflects into DirectByteBuffer.attachment()
#:   / cleaner() and calls jdk.internal.ref.Cleaner.clean(). Without them the
#:   4.9 broker's shutdown hook dies with InaccessibleObjectException half way
#:   (store not shut down cleanly, so the next start recovers as after a
#:   crash). 5.x frees buffers through netty and does not need them.
#: * sun.nio.ch: TransientStorePool / warm-up mlock cast to
#:   sun.nio.ch.DirectBuffer (4.9 and 5.3.3 alike); with
#:   transientStorePoolEnable=true the broker fails to start without it
#:   (IllegalAccessError).
ADD_OPENS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
)

_build_lock = threading.Lock()
_built = False
_built_server_only: set[str] = set()
_default_home: Path | None = None
#: processes started here and not yet stopped; killed when Python exits
_live: "weakref.WeakSet" = None  # type: ignore[assignment]


def _track(proc: subprocess.Popen) -> None:
    global _live
    if _live is None:
        import atexit

        _live = weakref.WeakSet()

        def _reap() -> None:
            for p in list(_live):
                if p.poll() is None:
                    try:
                        p.kill()
                    except OSError:
                        pass
        atexit.register(_reap)
    _live.add(proc)


class JavaError(RuntimeError):
    """A Java program failed; the message ends with its stderr/log tail."""


class PortInUse(JavaError):
    """A server could not bind its port (someone took it after we chose it)."""


# --------------------------------------------------------------------------
# build and class paths


def ensure_built(force: bool = False, server_versions: Iterable[str] = ()) -> None:
    """Runs build.sh once per process (it is itself idempotent and locked), again when asked for a
    version of :data:`SERVER_ONLY_VERSIONS` not fetched yet (``RMQPY_INTEROP_SERVER_VERSIONS``)."""
    global _built
    wanted = set(server_versions)
    for v in wanted:
        if v not in SERVER_ONLY_VERSIONS:
            raise ValueError(f"{v!r} is not one of {SERVER_ONLY_VERSIONS}")
    with _build_lock:
        if _built and not force and wanted <= _built_server_only:
            return
        env = dict(os.environ)
        wanted |= _built_server_only
        if wanted:
            env["RMQPY_INTEROP_SERVER_VERSIONS"] = " ".join(sorted(wanted))
        proc = subprocess.run(
            ["bash", str(BUILD_SH)],
            cwd=str(JAVA_DIR),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=1800,
        )
        if proc.returncode != 0:
            raise JavaError(f"{BUILD_SH} failed (exit {proc.returncode}):\n{_tail(proc.stdout, 60)}")
        _built = True
        _built_server_only.update(wanted)


def _check_version(version: str, kind: str = "server") -> None:
    known = VERSIONS if kind not in ("server", "proxy") else VERSIONS + SERVER_ONLY_VERSIONS
    if version not in known:
        raise ValueError(f"unknown RocketMQ version {version!r} for {kind}; known: {known}")


def lib_dir(version: str, kind: str = "client") -> Path:
    """``target/lib-V`` (client, tools), ``target/lib-V-server`` (server) or ``target/lib-V-proxy`` (5.x proxy)."""
    _check_version(version, kind)
    return TARGET / (f"lib-{version}-{kind}" if kind in ("server", "proxy") else f"lib-{version}")


def classpath(version: str, kind: str = "harness") -> str:
    """Class path for one kind of JVM.

    kind: ``"harness"`` (harness.jar + client/tools jars), ``"client"`` or
    ``"tools"`` (client + mqadmin jars of ``version``), ``"server"`` (broker +
    name server jars, see :data:`SERVER_VERSIONS`), ``"proxy"`` (rocketmq-proxy, 5.x).
    """
    if kind not in ("harness", "client", "tools", "server", "proxy"):
        raise ValueError(f"unknown classpath kind {kind!r}")
    parts = []
    if kind == "harness":
        parts.append(str(HARNESS_JAR))
    parts.append(str(lib_dir(version, kind)) + os.sep + "*")
    return os.pathsep.join(parts)


def _kind_for(main_class: str) -> str:
    if main_class in (NAMESRV_MAIN, BROKER_MAIN) or main_class.startswith(
        ("org.apache.rocketmq.broker.", "org.apache.rocketmq.namesrv.", "org.apache.rocketmq.container.")
    ):
        return "server"
    if main_class.startswith("org.apache.rocketmq.tools."):
        return "tools"
    if main_class.startswith("io.rmqpy."):
        return "harness"
    return "client"


def java_executable() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise JavaError("no java on PATH (tests/interop/java/build.sh installs a JDK 17 when run as root)")
    return found


def jvm_options(heap_mb: int = 256, server: bool = False) -> list[str]:
    """JVM flags: small heap, one cheap GC, JDK 17 opens, quiet and fast start."""
    opts = [
        f"-Xms{min(heap_mb, 64) if not server else heap_mb}m",
        f"-Xmx{heap_mb}m",
        f"-XX:MaxDirectMemorySize={max(heap_mb, 256)}m",
        # several JVMs share 2 cores: no parallel/concurrent GC threads
        "-XX:+UseSerialGC",
        "-XX:-UsePerfData",  # no /tmp/hsperfdata_* files
        "-XX:+IgnoreUnrecognizedVMOptions",
        "-XX:-OmitStackTraceInFastThrow",
        "-Djava.net.preferIPv4Stack=true",
        "-Dfile.encoding=UTF-8",
    ]
    # C1 only: clients and the test servers alike live for seconds to a minute, too short for C2
    # to pay back its compile time on 2 shared cores (name server + broker boot, measured:
    # 4.9.7 8.1 s -> 3.6 s, 5.3.3 12.2 s -> 8.4 s)
    opts.append("-XX:TieredStopAtLevel=1")
    opts.extend(ADD_OPENS)
    return opts


def default_home() -> Path:
    """Per-process scratch ROCKETMQ_HOME / user.home for client-side JVMs."""
    global _default_home
    if _default_home is None:
        _default_home = Path(tempfile.mkdtemp(prefix="rmqpy-jvm-"))
        import atexit

        atexit.register(shutil.rmtree, str(_default_home), True)
    prepare_home(_default_home)
    return _default_home


_LOGBACK = """<?xml version="1.0" encoding="UTF-8"?>
<!-- written by tests/interop/jvm.py: everything to one file, nothing to the console -->
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{logfile}</file>
    <append>true</append>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5level [%thread] %logger{{0}} - %msg%n</pattern></encoder>
  </appender>
  <root level="{level}"><appender-ref ref="FILE"/></root>
</configuration>
"""


def prepare_home(home: Path) -> Path:
    """Makes ``home`` usable as ROCKETMQ_HOME and user.home.

    RocketMQ 4.9 reads ``$ROCKETMQ_HOME/conf/logback_{namesrv,broker,tools}.xml``
    (mqadmin 4.9 does nothing at all without logback_tools.xml); 5.x logs to
    ``${user.home}/logs/rocketmqlogs`` with configs inside its jars.
    """
    home = Path(home)
    (home / "conf").mkdir(parents=True, exist_ok=True)
    (home / "logs").mkdir(exist_ok=True)
    for name, level in (("namesrv", "INFO"), ("broker", "INFO"), ("tools", "WARN")):
        f = home / "conf" / f"logback_{name}.xml"
        if not f.exists():
            f.write_text(_LOGBACK.format(logfile=home / "logs" / f"{name}.log", level=level))
    return home


def home_sysprops(home: Path, client_log_level: str = "WARN") -> dict[str, str]:
    home = Path(home)
    return {
        "user.home": str(home),
        "rocketmq.home.dir": str(home),
        # 4.9 client logger (rocketmq-logging): file only
        "rocketmq.client.logRoot": str(home / "logs" / "rocketmqlogs"),
        "rocketmq.client.logLevel": client_log_level,
        "rocketmq.client.logFileMaxIndex": "2",
        # 5.x client/tools logback configs
        "rocketmq.log.root": str(home / "logs" / "rocketmqlogs"),
        "rocketmq.log.level": client_log_level.lower(),
        "rocketmq.log.file.maxIndex": "2",
        "java.io.tmpdir": str(home),
    }


_LOGBACK_5X = {
    NAMESRV_MAIN: "rmq.namesrv.logback.xml",
    BROKER_MAIN: "rmq.broker.logback.xml",
    CONTROLLER_MAIN: "rmq.controller.logback.xml",
    "server": "rmq.broker.logback.xml",
    "proxy": "rmq.proxy.logback.xml",
    "tools": "rmq.tools.logback.xml",
    "client": "rmq.client.logback.xml",
    "harness": "rmq.client.logback.xml",
}


def java_cmd(
    version: str,
    main_class: str,
    args: Sequence[str] = (),
    sysprops: Mapping[str, str] | None = None,
    *,
    kind: str | None = None,
    heap_mb: int | None = None,
    jvm_args: Sequence[str] = (),
    home: Path | None = None,
    archive_options: Sequence[str] | None = None,
) -> list[str]:
    """The ``java`` command line for ``main_class`` on ``version``'s class path.

    ``kind`` defaults from the main class (broker/namesrv -> server jars,
    tools -> mqadmin jars, io.rmqpy -> harness). ``home`` (ROCKETMQ_HOME and
    user.home, default: a per-process temp dir) receives every log file.
    ``archive_options``: the class-archive options (default: tests/interop/cds.py's for the class path).
    """
    kind = kind or _kind_for(main_class)
    server = kind == "server"
    if heap_mb is None:
        heap_mb = 256
    h = prepare_home(Path(home)) if home else default_home()
    props = home_sysprops(h, "INFO" if server else "WARN")
    # 4.9 (plain logback): without this, whatever logs through slf4j before
    # RocketMQ configures logback (or in a client, where nobody does) goes to
    # the console at DEBUG
    props["logback.configurationFile"] = str(
        h / "conf" / ("logback_namesrv.xml" if main_class == NAMESRV_MAIN
                      else "logback_broker.xml" if server else "logback_tools.xml"))
    # 5.x picks the first rmq.*.logback.xml found on the class path (broker
    # before namesrv, tools before client); name the right one explicitly.
    props["rmq.logback.configurationFile"] = _LOGBACK_5X.get(main_class, _LOGBACK_5X[kind])
    props.update(sysprops or {})
    java, cp = java_executable(), classpath(version, kind)
    archive = cds.options(java, cp) if archive_options is None else list(archive_options)
    cmd = [java, *jvm_options(heap_mb, server=server), *archive, *jvm_args]
    cmd += [f"-D{k}={v}" for k, v in props.items()]
    cmd += ["-cp", cp, main_class, *map(str, args)]
    return cmd


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["ROCKETMQ_HOME"] = str(home)
    env.pop("JAVA_TOOL_OPTIONS", None)  # would print "Picked up ..." on stderr
    env.pop("NAMESRV_ADDR", None)
    return env


# --------------------------------------------------------------------------
# ports


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port(span: Iterable[int] = (0,)) -> int:
    """A port p such that p+d is free for every d in ``span`` (tests/ports.py: below the ephemeral range,
    a band per xdist worker)."""
    return ports.free_port(span)


def free_broker_port() -> int:
    """listenPort for a broker: it also binds listenPort-2 (fast) and +1 (HA)."""
    return free_port(span=(-2, 0, 1))


def wait_port(port: int, timeout: float, host: str = "127.0.0.1", proc: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


# --------------------------------------------------------------------------
# a tiny remoting client, to ask a name server (Java or rmqpy) what it knows

#: MQVersion ordinal of V4_9_8 (the harness' client version)
REMOTING_VERSION = 409


def remoting_request(addr: str, code: int, ext_fields: Mapping[str, str] | None = None, body: bytes = b"",
                     timeout: float = 5.0) -> tuple[int, str | None, dict, bytes]:
    """Sends one JSON-serialised RemotingCommand and returns the reply's
    (code, remark, extFields, body). Raises OSError on connection problems. The default timeout is
    mqadmin's (DefaultMQAdminExt, 5 s): a loaded Java broker's GET_BROKER_RUNTIME_INFO passed 3 s."""
    host, port = addr.rsplit(":", 1)
    header = {"code": code, "flag": 0, "language": "JAVA", "opaque": 1,
              "serializeTypeCurrentRPC": "JSON", "version": REMOTING_VERSION}
    if ext_fields:
        header["extFields"] = {str(k): str(v) for k, v in ext_fields.items()}
    hb = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    frame = (4 + len(hb) + len(body)).to_bytes(4, "big") + len(hb).to_bytes(4, "big") + hb + body
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(frame)

        def recv(n: int) -> bytes:
            buf = b""
            while len(buf) < n:
                chunk = sock.recv(n - len(buf))
                if not chunk:
                    raise ConnectionError(f"{addr} closed the connection")
                buf += chunk
            return buf

        length = int.from_bytes(recv(4), "big")
        data = recv(length)
    hlen = int.from_bytes(data[:4], "big") & 0xFFFFFF
    if data[0] != 0:
        raise ValueError("reply is not JSON-serialised")
    reply = json.loads(data[4:4 + hlen])
    return int(reply.get("code", -1)), reply.get("remark"), reply.get("extFields") or {}, data[4 + hlen:]


def broker_registered(namesrv_addr: str, broker_addr: str, topic: str | None = None) -> bool:
    """True when the name server lists ``broker_addr`` in its cluster info
    (and, with ``topic``, in that topic's route). A ``;``-separated list of
    name servers must all list it, as a broker registers with every one."""
    addrs = [a.strip() for a in namesrv_addr.split(";") if a.strip()]
    if len(addrs) > 1:
        return all(broker_registered(a, broker_addr, topic) for a in addrs)
    try:
        if topic:
            code, _, _, body = remoting_request(namesrv_addr, 105, {"topic": topic})
        else:
            code, _, _, body = remoting_request(namesrv_addr, 106)
    except (OSError, ValueError):
        return False
    return code == 0 and broker_addr.encode() in body


def wait_broker_registered(namesrv_addr: str, broker_addr: str, topic: str | None = None,
                           timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if broker_registered(namesrv_addr, broker_addr, topic):
            return True
        time.sleep(0.2)
    return False


# --------------------------------------------------------------------------
# long-running Java servers


class JavaProcess:
    """A started Java server (name server or broker)."""

    def __init__(self, name: str, version: str, proc: subprocess.Popen, log: Path, home: Path,
                 port: int, config: Path, props: Mapping[str, object]):
        self.name = name
        self.version = version
        self.server_version = SERVER_VERSIONS[version]
        self.proc = proc
        self.pid = proc.pid
        self.log = log  # stdout + stderr of the JVM
        self.home = home
        self.logs_dir = home / "logs"  # RocketMQ's own log files
        self.port = port
        self.addr = f"127.0.0.1:{port}"
        self.config = config
        self.props = dict(props)
        #: where this JVM's class archive goes when it ends (tests/interop/cds.py), if it writes one
        self.archive_part: Path | None = None

    def __repr__(self) -> str:
        return f"<JavaProcess {self.name} {self.server_version} pid={self.pid} {self.addr}>"

    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (RocketMQ's shutdown hook runs), then SIGKILL after ``timeout``.

        A clean broker shutdown takes ~7 s on 4.9 and ~18 s on 5.3.3 (its
        PopReviveService and netty event threads each wait out a poll); pass
        a small ``timeout`` when a clean store does not matter."""
        self.dump_archive()
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
            except ProcessLookupError:
                pass
        self._forget_attach_socket()
        return self.proc.poll()

    def kill9(self) -> int | None:
        self.dump_archive()
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        self._forget_attach_socket()
        return self.proc.poll()

    def _forget_attach_socket(self) -> None:
        """The attach socket jcmd made the JVM open (dump_archive): HotSpot removes /tmp/.java_pid<pid>
        when it exits, not when it is killed, and a run of the suite left a hundred behind."""
        if self.proc.poll() is not None:
            Path(f"/tmp/.java_pid{self.proc.pid}").unlink(missing_ok=True)

    def dump_archive(self) -> None:
        """Write this JVM's class archive before it ends (once, at its first stop or kill): at the
        end, so that the pause of the dump (1-2 s at a safepoint) falls outside any scenario. A test
        that times a kill -9 calls it before its scenario, so that the kill is at once."""
        part, self.archive_part = self.archive_part, None
        if part is not None and self.proc.poll() is None:
            cds.dump_running(java_executable(), self.proc.pid, part)

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log_text(), lines)

    def __enter__(self) -> "JavaProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _write_properties(path: Path, props: Mapping[str, object]) -> None:
    lines = []
    for k, v in props.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        # java.util.Properties: backslashes escape; Linux paths have none
        lines.append(f"{k}={v}")
    path.write_text("\n".join(lines) + "\n")


#: TLS of the Java name server's and broker's remoting port: off unless a test asks for it (any ``tls.*``
#: key in its properties or system properties). Java's default (``tls.server.mode=permissive``) builds a
#: self-signed certificate at every start: a 2048-bit RSA key and BouncyCastle's signed jars verified
#: (no class archive covers signed jars), 4-7 s of CPU per server on this machine, for a TLS port that
#: no test of a Java name server or broker uses (the TLS tests run against rmqpy and Apache's proxy,
#: whose start this does not change). Measured, 5.3.3, two rounds at load 7-8: name server 6.7-7.0 s ->
#: 1.3-1.7 s, broker boot 12.5-14.8 s -> 2.1-5.7 s (CPU 2.5-3.2 + 6.0-6.5 s -> 0.7-0.8 + 1.5-2.8 s).
SERVER_TLS_OFF = {"tls.server.mode": "disabled"}


def _without_server_tls(props: Mapping[str, object], sysprops: Mapping[str, str] | None) -> dict[str, str]:
    if any(str(k).startswith("tls.") for k in (*props, *(sysprops or {}))):
        return dict(sysprops or {})
    return {**SERVER_TLS_OFF, **(sysprops or {})}


def _start_server(name: str, version: str, main: str, home: Path, config: Path, props: Mapping[str, object],
                  port: int, heap_mb: int, sysprops: Mapping[str, str] | None, jvm_args: Sequence[str],
                  ready_text: str, timeout: float) -> JavaProcess:
    ensure_built()
    sysprops = _without_server_tls(props, sysprops)
    log = home / f"{name}.out"
    java = java_executable()
    archive_options, archive_part = cds.server_options(java, classpath(version, "server"), main)
    cmd = java_cmd(version, main, ["-c", str(config)], sysprops, kind="server", heap_mb=heap_mb,
                   jvm_args=jvm_args, home=home, archive_options=archive_options)
    (home / f"{name}.cmd").write_text(" ".join(cmd) + "\n")
    with open(log, "ab") as logf:
        proc = subprocess.Popen(cmd, cwd=str(home), env=_env(home), stdin=subprocess.DEVNULL,
                                stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    _track(proc)
    handle = JavaProcess(name, version, proc, log, home, port, config, props)
    deadline = time.monotonic() + timeout
    try:
        if not wait_port(port, timeout, proc=proc):
            raise JavaError(f"{name} {handle.server_version} did not listen on {port} "
                            f"(exit {proc.poll()}):\n{handle.log_tail()}")
        while ready_text not in handle.log_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise JavaError(f"{name} {handle.server_version} did not log {ready_text!r} "
                                f"(exit {proc.poll()}):\n{handle.log_tail()}")
            time.sleep(0.1)
    except JavaError as e:
        handle.kill9()
        if "BindException" in handle.log_text() or "Address already in use" in handle.log_text():
            raise PortInUse(str(e)) from None
        raise
    except BaseException:
        handle.kill9()
        raise
    handle.archive_part = archive_part  # written when it stops (its classes are all loaded by then)
    return handle


def start_java_namesrv(
    version: str,
    port: int | None = None,
    workdir: Path | str | None = None,
    props: Mapping[str, object] | None = None,
    *,
    heap_mb: int = 128,
    sysprops: Mapping[str, str] | None = None,
    jvm_args: Sequence[str] = (),
    timeout: float = 60.0,
) -> JavaProcess:
    """Starts the real Java name server; returns when it accepts connections
    and has logged "boot success". ``workdir`` becomes its ROCKETMQ_HOME and
    user.home (kvConfig.json, logs/, namesrv.out = stdout/stderr)."""
    _check_version(version)
    home = prepare_home(Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="rmqpy-namesrv-")))
    if port is None:
        for attempt in range(3):  # a port we chose may be taken before the JVM binds it
            try:
                return start_java_namesrv(version, free_port(), home, props, heap_mb=heap_mb, sysprops=sysprops,
                                          jvm_args=jvm_args, timeout=timeout)
            except PortInUse:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable: the last attempt returned or raised")
    conf: dict[str, object] = {
        "listenPort": port,
        "bindAddress": "127.0.0.1",  # 5.x only; 4.9 always binds the wildcard address
        "rocketmqHome": str(home),
        "kvConfigPath": str(home / "namesrv" / "kvConfig.json"),
        "configStorePath": str(home / "namesrv" / "namesrv.properties"),
    }
    conf.update(props or {})
    config = home / "namesrv.properties"
    _write_properties(config, conf)
    return _start_server("namesrv", version, NAMESRV_MAIN, home, config, conf, port, heap_mb, sysprops,
                         jvm_args, "boot success", timeout)


#: broker defaults: tiny store files, auto-created topics, loopback addresses
BROKER_DEFAULTS: dict[str, object] = {
    "brokerClusterName": "DefaultCluster",
    "brokerName": "broker-a",
    "brokerId": 0,
    "brokerRole": "ASYNC_MASTER",
    "flushDiskType": "ASYNC_FLUSH",
    "autoCreateTopicEnable": True,
    "autoCreateSubscriptionGroup": True,
    "mappedFileSizeCommitLog": 8 * 1024 * 1024,  # a 4 MiB message (the default max) still fits
    "mappedFileSizeConsumeQueue": 20 * 10000,  # 10k entries per consume queue file
    "maxHashSlotNum": 20000,  # index file ~2 MB instead of ~420 MB
    "maxIndexNum": 80000,
    "mappedFileSizeTimerLog": 4 * 1024 * 1024,  # 5.x timer log (100 MB by default)
    "bindAddress": "127.0.0.1",  # 5.x only
}


def controller_leader(addr: str) -> str:
    """The leader the controller at ``addr`` names (GET_CONTROLLER_METADATA_INFO), "" if none yet."""
    try:
        code, _remark, ext, _body = remoting_request(addr, 1005)  # CONTROLLER_GET_METADATA_INFO
    except (OSError, ValueError):
        return ""
    return ext.get("controllerLeaderAddress", "") if code == 0 else ""


def start_java_namesrv_with_controller(version: str, workdir: Path, ip: str, timeout: float = 30.0,
                                       props: Mapping[str, object] | None = None) -> tuple[JavaProcess, str, str]:
    """Apache's name server with its controller embedded (``enableControllerInNamesrv``, DLedger with one
    peer), once the controller has elected itself (a broker started before that waits for its 5 s
    retry): (process, name server address, controller address), both on ``ip``. ``props`` adds keys
    (the controller's metrics*, say)."""
    ctl = f"{ip}:{free_port()}"
    ns = start_java_namesrv(version, workdir=workdir, props={
        "bindAddress": "0.0.0.0", "enableControllerInNamesrv": True, "controllerDLegerGroup": "ctl",
        "controllerDLegerPeers": f"n0-{ctl}", "controllerDLegerSelfId": "n0",
        "controllerStorePath": str(workdir / "controller"), "mappedFileSize": 4 * 1024 * 1024, **(props or {})})
    deadline = time.monotonic() + timeout
    while controller_leader(ctl) != ctl:
        if time.monotonic() > deadline:
            ns.kill9()
            raise JavaError(f"the controller embedded in the name server did not elect itself:\n{ns.log_tail(30)}")
        time.sleep(0.2)
    return ns, f"{ip}:{ns.port}", ctl


def start_java_controller(version: str, workdir: Path, port: int, props: Mapping[str, object], *,
                          heap_mb: int = 128, timeout: float = 60.0) -> JavaProcess:
    """Apache's standalone controller (``ControllerStartup -c controller.properties``, rocketmq-controller
    of ``version``) on ``port`` (its ``listenPort``), the ControllerConfig keys of ``props``
    (``controllerDLegerGroup``, ``controllerDLegerPeers``, ``controllerDLegerSelfId``, ...); returns when it
    listens and printed "boot success" (it may not have a leader yet: see :func:`controller_leader`).
    ``workdir`` is its ROCKETMQ_HOME and user.home; its store defaults to ``workdir/store``. Started
    again on the same ``workdir`` and ``port``, it reads its DLedger journal."""
    _check_version(version)
    home = prepare_home(Path(workdir))
    conf = {"listenPort": port, "rocketmqHome": str(home), "controllerStorePath": str(home / "store"),
            "mappedFileSize": 4 * 1024 * 1024, **props}
    config = home / "controller.properties"
    _write_properties(config, conf)
    return _start_server("controller", version, CONTROLLER_MAIN, home, config, {k: str(v) for k, v in conf.items()},
                         port, heap_mb, None, (), "boot success", timeout)


def start_java_broker(
    version: str,
    workdir: Path | str | None,
    namesrv_addr: str,
    broker_props: Mapping[str, object] | None = None,
    *,
    listen_port: int | None = None,
    broker_ip: str = "127.0.0.1",
    heap_mb: int = 256,
    sysprops: Mapping[str, str] | None = None,
    jvm_args: Sequence[str] = (),
    timeout: float = 90.0,
    wait_registered: bool = True,
) -> JavaProcess:
    """Starts the real Java broker (BrokerStartup -c broker.properties).

    ``broker_props`` override :data:`BROKER_DEFAULTS` (any BrokerConfig /
    MessageStoreConfig / NettyServerConfig property, e.g. brokerName,
    brokerClusterName, listenPort, brokerIP1). The store lives in
    ``workdir/store``; the broker also binds listenPort-2 and listenPort+1.
    Returns when the port accepts connections, "boot success" was logged and
    (``wait_registered``) the name server routes TBW102 (autoCreateTopicEnable)
    or lists the broker. The 4.9 broker registers before "boot success"; the
    5.3.3 broker only about 10 s later (its first registration finds no
    "available" name server yet, the next runs after a fixed 10 s delay).
    """
    _check_version(version)
    home = prepare_home(Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="rmqpy-broker-")))
    props: dict[str, object] = dict(BROKER_DEFAULTS)
    props.update({
        "namesrvAddr": namesrv_addr,
        "brokerIP1": broker_ip,
        "rocketmqHome": str(home),
        "storePathRootDir": str(home / "store"),
        "storePathCommitLog": str(home / "store" / "commitlog"),
    })
    props.update(broker_props or {})
    if listen_port is not None:
        props["listenPort"] = listen_port
    if "listenPort" not in props:
        for attempt in range(3):  # a port we chose may be taken before the JVM binds it
            try:
                return start_java_broker(version, home, namesrv_addr, broker_props, listen_port=free_broker_port(),
                                         broker_ip=broker_ip, heap_mb=heap_mb, sysprops=sysprops,
                                         jvm_args=jvm_args, timeout=timeout, wait_registered=wait_registered)
            except PortInUse:
                if attempt == 2:
                    raise
    port = int(str(props["listenPort"]))
    config = home / "broker.properties"
    _write_properties(config, props)
    started = time.monotonic()
    broker = _start_server("broker", version, BROKER_MAIN, home, config, {k: str(v) for k, v in props.items()},
                           port, heap_mb, sysprops, jvm_args, "boot success", timeout)
    if wait_registered:
        auto = str(props.get("autoCreateTopicEnable")).lower() == "true"
        addr = f"{props['brokerIP1']}:{port}"
        left = max(5.0, timeout - (time.monotonic() - started))
        if not wait_broker_registered(namesrv_addr, addr, "TBW102" if auto else None, left):
            broker.kill9()
            raise JavaError(f"broker {addr} not registered with name server {namesrv_addr} "
                            f"within {timeout}s:\n{broker.log_tail()}")
    return broker


def start_java_proxy(
    version: str,
    workdir: Path | str,
    namesrv_addr: str,
    *,
    grpc_port: int | None = None,
    remoting_port: int | None = None,
    props: Mapping[str, object] | None = None,
    heap_mb: int = 256,
    timeout: float = 90.0,
) -> JavaProcess:
    """Apache's ``rocketmq-proxy`` (5.x, Maven Central) in cluster mode in front of the brokers that
    ``namesrv_addr`` knows; ``.port`` is its gRPC port (all interfaces), ``props`` more rmq-proxy.json keys."""
    ensure_built()
    home = prepare_home(Path(workdir))
    grpc_port = grpc_port or free_port()
    remoting_port = remoting_port or free_port()
    config = home / "rmq-proxy.json"
    conf = {"rocketMQClusterName": "DefaultCluster", "namesrvAddr": namesrv_addr, "proxyMode": "cluster",
            "grpcServerPort": grpc_port, "remotingListenPort": remoting_port, **(props or {})}
    config.write_text(json.dumps(conf))
    java = java_executable()
    archive_options, archive_part = cds.server_options(java, classpath(version, "proxy"), PROXY_MAIN)
    cmd = java_cmd(version, PROXY_MAIN, ["-pc", str(config), "-pm", "cluster"], kind="proxy", heap_mb=heap_mb,
                   home=home, archive_options=archive_options)
    log = home / "proxy.out"
    (home / "proxy.cmd").write_text(" ".join(cmd) + "\n")
    with open(log, "ab") as logf:
        proc = subprocess.Popen(cmd, cwd=str(home), env=_env(home), stdin=subprocess.DEVNULL,
                                stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    _track(proc)
    handle = JavaProcess("proxy", version, proc, log, home, grpc_port, config, {k: str(v) for k, v in conf.items()})
    deadline = time.monotonic() + timeout
    try:
        while "rocketmq-proxy startup successfully" not in handle.log_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise JavaError(f"proxy {version} did not start (exit {proc.poll()}):\n{handle.log_tail()}")
            time.sleep(0.1)
        if not wait_port(grpc_port, max(1.0, deadline - time.monotonic()), proc=proc):
            raise JavaError(f"proxy {version} does not listen on {grpc_port}:\n{handle.log_tail()}")
    except BaseException:
        handle.kill9()
        raise
    handle.archive_part = archive_part
    return handle


# --------------------------------------------------------------------------
# one-shot Java programs


def mqadmin(
    version: str,
    args: Sequence[str],
    namesrv_addr: str | None = None,
    timeout: float = 60.0,
    *,
    home: Path | None = None,
    sysprops: Mapping[str, str] | None = None,
    fast: bool = True,
) -> tuple[int, str, str]:
    """Runs ``mqadmin ARGS`` (MQAdminStartup); returns (returncode, stdout, stderr).

    ``-n namesrv_addr`` is added after the subcommand unless ``args`` has -n.
    Note: mqadmin prints errors and still exits 0 for most failures; check
    the output. ``fast`` runs MQAdminStartup through the harness' FastExit
    launcher, which saves the ~3 s that the client's shutdown spends waiting
    for an idle thread (the command itself runs unchanged); ``fast=False``
    runs it exactly as ``bin/mqadmin`` would.
    """
    ensure_built()
    args = [str(a) for a in args]
    if namesrv_addr and "-n" not in args and args:
        args = [args[0], "-n", namesrv_addr, *args[1:]]
    h = prepare_home(Path(home)) if home else default_home()
    props = {"rmq.logback.configurationFile": "rmq.tools.logback.xml", **(sysprops or {})}
    if fast:
        cmd = java_cmd(version, FASTEXIT_MAIN, [MQADMIN_MAIN, *args], props, kind="harness", home=h)
    else:
        cmd = java_cmd(version, MQADMIN_MAIN, args, props, kind="tools", home=h)
    proc = subprocess.run(cmd, cwd=str(h), env=_env(h), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


class JavaCluster:
    """The real Java name server and one broker of ``version``, both bound to 0.0.0.0 and reached
    by clients at ``host`` (an IP address), started together. ``close()`` shuts both down cleanly;
    ``close(clean=False)`` kills them (a clean 5.3.3 shutdown takes ~18 s) when the store does
    not matter."""

    def __init__(self, version: str, tmp: Path, host: str, broker_props: Mapping[str, object]) -> None:
        self.version = version
        self.ns = start_java_namesrv(version, workdir=tmp / "java-ns", props={"bindAddress": "0.0.0.0"})
        self.ns_addr = f"{host}:{self.ns.port}"
        try:
            self.broker = start_java_broker(version, tmp / "java-broker", self.ns_addr,
                                            {"bindAddress": "0.0.0.0", **broker_props}, broker_ip=host)
        except BaseException:
            self.ns.kill9()
            raise
        self.broker_addr = f"{host}:{self.broker.port}"

    def close(self, clean: bool = True) -> None:
        if clean:
            self.broker.stop(10)
            self.ns.stop(5)
        else:
            self.broker.kill9()
            self.ns.kill9()


class Events(list):
    """Parsed JSON-line events of one harness run (a list of dicts)."""

    returncode: int | None = 0  # None: the process outlived the wait for it
    stderr: str = ""
    cmd: list[str]

    def of(self, name: str) -> list[dict]:
        return [e for e in self if e.get("event") == name]

    @property
    def done(self) -> dict | None:
        d = self.of("done")
        return d[-1] if d else None

    @property
    def errors(self) -> list[dict]:
        return self.of("error")


class HarnessError(JavaError):
    def __init__(self, message: str, events: Events):
        super().__init__(message)
        self.events = events


def _parse_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            ev = json.loads(line)
            if not isinstance(ev, dict):
                ev = {"event": "_raw", "line": line}
        except ValueError:
            ev = {"event": "_raw", "line": line}
        out.append(ev)
    return out


def harness_cmd(version: str, args: Sequence[str], *, home: Path | None = None,
                sysprops: Mapping[str, str] | None = None, heap_mb: int = 256) -> list[str]:
    ensure_built()
    return java_cmd(version, HARNESS_MAIN, [str(a) for a in args], sysprops, kind="harness",
                    heap_mb=heap_mb, home=home)


def harness(
    version: str,
    args: Sequence[str],
    timeout: float = 120.0,
    *,
    check: bool = True,
    home: Path | None = None,
    sysprops: Mapping[str, str] | None = None,
) -> Events:
    """Runs the harness to completion and returns its events.

    With ``check`` (default) a non-zero exit raises :class:`HarnessError`
    whose message has the error events and the stderr tail; either way the
    returned :class:`Events` carries ``returncode`` and ``stderr``.
    """
    h = prepare_home(Path(home)) if home else default_home()
    cmd = harness_cmd(version, args, home=h, sysprops=sysprops)
    try:
        proc = subprocess.run(cmd, cwd=str(h), env=_env(h), stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        ev = Events(_parse_lines(_text(e.stdout)))
        ev.returncode, ev.stderr, ev.cmd = -9, _text(e.stderr), cmd
        raise HarnessError(f"harness {' '.join(map(str, args[:1]))} timed out after {timeout}s\n"
                           f"{_tail(ev.stderr, 30)}", ev) from None
    ev = Events(_parse_lines(proc.stdout))
    ev.returncode, ev.stderr, ev.cmd = proc.returncode, proc.stderr, cmd
    if check and proc.returncode != 0:
        raise HarnessError(
            f"harness {args[0] if args else ''} exited {proc.returncode}\n"
            f"errors: {json.dumps(ev.errors)[:4000]}\nstderr tail:\n{_tail(proc.stderr, 30)}", ev)
    return ev


class HarnessProcess:
    """A running harness (e.g. a consumer) whose events are read as they come."""

    def __init__(self, cmd: list[str], home: Path):
        self.cmd = cmd
        self.home = home
        fd, path = tempfile.mkstemp(prefix="harness-", suffix=".err", dir=str(home))
        self.stderr_path = Path(path)
        self._stderr = os.fdopen(fd, "wb")
        self.proc = subprocess.Popen(cmd, cwd=str(home), env=_env(home), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=self._stderr, start_new_session=True)
        _track(self.proc)
        self.pid = self.proc.pid
        self.events = Events()
        self._eof = False
        self._q: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            for ev in _parse_lines(raw.decode("utf-8", "replace")):
                self._q.put(ev)
        self._q.put(None)  # EOF

    def next_event(self, timeout: float) -> dict | None:
        """The next event, or None at EOF or after ``timeout`` seconds."""
        if self._eof:
            return None
        try:
            ev = self._q.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None
        if ev is None:
            self._eof = True
            return None
        self.events.append(ev)
        return ev

    def wait_for(self, name: str, timeout: float = 60.0,
                 predicate: Callable[[dict], bool] | None = None) -> dict:
        """Reads until an event called ``name`` (matching ``predicate``) arrives;
        raises :class:`HarnessError` at EOF or after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            ev = self.next_event(left) if left > 0 else None
            if ev is None:
                raise HarnessError(f"no {name!r} event within {timeout}s (exit {self.proc.poll()}); "
                                   f"errors: {json.dumps(self.events.errors)[:2000]}\n"
                                   f"{_tail(self.stderr_text(), 30)}", self.events)
            if ev.get("event") == name and (predicate is None or predicate(ev)):
                return ev

    def collect(self, timeout: float = 120.0) -> Events:
        """Reads to the end and waits for the process to exit (it is stopped
        after ``timeout`` seconds); returns all events, with returncode and
        stderr set."""
        deadline = time.monotonic() + timeout
        while not self._eof:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                break
            self.next_event(left)
        try:
            self.proc.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.stop()
        self._reader.join(5)
        while not self._eof and self.next_event(0.1) is not None:  # drain after a stop
            pass
        self.events.returncode = self.proc.poll()
        self.events.stderr = self.stderr_text()
        self.events.cmd = self.cmd
        return self.events

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def stderr_text(self) -> str:
        self._stderr.flush()
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 10.0) -> int | None:
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            except ProcessLookupError:
                pass
        return self.proc.poll()

    def __enter__(self) -> "HarnessProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def harness_popen(
    version: str,
    args: Sequence[str],
    *,
    home: Path | None = None,
    sysprops: Mapping[str, str] | None = None,
) -> HarnessProcess:
    """Starts the harness in the background (e.g. ``consume-push``); read
    its events with :meth:`HarnessProcess.wait_for` / ``collect``."""
    h = prepare_home(Path(home)) if home else default_home()
    return HarnessProcess(harness_cmd(version, args, home=h, sysprops=sysprops), h)


def grpc_harness_cmd(args: Sequence[str], *, home: Path | None = None, heap_mb: int = 128) -> list[str]:
    """The ``java`` command line of the gRPC client harness (the official ``rocketmq-client-java``,
    a shaded jar of its own, so none of the remoting jars is on this class path)."""
    ensure_built()
    h = prepare_home(Path(home)) if home else default_home()
    cp = os.pathsep.join([str(GRPC_HARNESS_JAR), str(TARGET / f"lib-grpc-{GRPC_CLIENT_VERSION}") + os.sep + "*"])
    props = {"user.home": str(h), "rocketmq.log.root": str(h / "logs" / "rocketmq"), "rocketmq.log.level": "warn",
             "java.io.tmpdir": str(h)}
    java = java_executable()
    return [java, *jvm_options(heap_mb), *cds.options(java, cp), *[f"-D{k}={v}" for k, v in props.items()],
            "-cp", cp, GRPC_HARNESS_MAIN, *map(str, args)]


# --------------------------------------------------------------------------


def _text(b: bytes | str | None) -> str:
    if b is None:
        return ""
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else b


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])
