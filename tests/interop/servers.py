"""rmqpy's own servers as real processes (``twistd -n rmq-namesrv`` / ``rmq-broker``)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests import ports
from tests.interop.jvm import wait_broker_registered

ROOT = Path(__file__).resolve().parents[2]


def free_port(span: int = 1) -> int:
    """A free port p such that p-2..p+span are free too (the broker uses p-2 and p+1)."""
    return ports.free_port(range(-2, span + 1))


def wait_port(host: str, port: int, timeout: float = 30, proc: subprocess.Popen | None = None,
              log: Path | None = None) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-3000:] if log and log.exists() else ""
            raise RuntimeError(f"server exited with {proc.returncode} before listening:\n{tail}")
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"{host}:{port} did not open within {timeout}s")


class ServerProcess:
    """A twistd child process with its own working directory and log file."""

    def __init__(self, tap: str, args: list[str], workdir: Path, port: int, host: str = "127.0.0.1") -> None:
        self.tap, self.args, self.workdir, self.port, self.host = tap, args, workdir, port, host
        self.log = workdir / f"{tap}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 30) -> "ServerProcess":
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(self.workdir))
        argv = [sys.executable, "-c", "from twisted.scripts.twistd import run; run()", "-n", "--pidfile=",
                self.tap, *self.args]
        # the log is appended to across restarts: only what this start writes counts below
        start_at = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(argv, cwd=str(ROOT), env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        wait_port(self.host, self.port, timeout, self.proc, self.log)
        # the port opens before the reactor runs; a SIGTERM before then skips the clean
        # shutdown, so a server counts as started once it logged "boot success"
        deadline = time.time() + timeout
        while b"boot success" not in self._log_since(start_at):
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"{self.tap} did not log 'boot success':\n{self.log_tail()}")
            time.sleep(0.05)
        return self

    def stop(self, timeout: float = 15) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def _log_since(self, offset: int) -> bytes:
        with open(self.log, "rb") as f:
            f.seek(offset)
            return f.read()

    def log_tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


def write_conf(path: Path, props: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{k}={'true' if v is True else 'false' if v is False else v}" for k, v in props.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def start_namesrv(workdir: Path, port: int | None = None, props: dict[str, object] | None = None,
                  host: str = "127.0.0.1") -> ServerProcess:
    port = port or free_port()
    conf = write_conf(workdir / "namesrv.conf", {"listenPort": port,
                                                 "kvConfigPath": workdir / "namesrv" / "kvConfig.json",
                                                 **(props or {})})
    return ServerProcess("rmq-namesrv", ["-c", str(conf)], workdir, port, host).start()


def start_broker(workdir: Path, namesrv_addr: str, props: dict[str, object] | None = None,
                 port: int | None = None, host: str = "127.0.0.1", timeout: float = 60) -> ServerProcess:
    port = port or free_port()
    conf = write_conf(workdir / "broker.conf", {
        "brokerClusterName": "DefaultCluster", "brokerName": "broker-py", "brokerId": 0,
        "listenPort": port, "namesrvAddr": namesrv_addr, "brokerIP1": host,
        "storePathRootDir": workdir / "store", "mappedFileSizeCommitLog": 4 * 1024 * 1024,
        "autoCreateTopicEnable": True,
        "grpcServerPort": -1,  # the gRPC endpoint (8081 by default) only where a test asks for it
        **(props or {})})
    return ServerProcess("rmq-broker", ["-c", str(conf)], workdir, port, host).start(timeout)


class Cluster:
    """rmqpy's name server and one broker on ``host`` (an IP address), started and stopped together.

    As a context manager it closes both on exit and prints the end of the broker's log.
    """

    def __init__(self, tmp: Path, host: str, broker_props: dict[str, object] | None = None) -> None:
        self.ns = start_namesrv(tmp / "ns", host=host)
        try:
            self.broker = start_broker(tmp / "broker", self.ns.addr, host=host, props=broker_props)
            # "boot success" comes before the name server has the broker's first registration: a
            # client asking for a route at once (TBW102 for a new topic) found none under load
            if not wait_broker_registered(self.ns.addr, self.broker.addr):
                raise RuntimeError(f"the broker did not register with its name server:\n{self.broker.log_tail()}")
        except BaseException:
            if getattr(self, "broker", None) is not None:
                self.broker.stop()
            self.ns.stop()
            raise
        self.ns_addr, self.broker_addr = self.ns.addr, self.broker.addr

    def close(self) -> None:
        self.broker.stop()
        self.ns.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
        print(self.broker.log_tail(3000))
