"""The official Go client (rocketmq-client-go/v2) through our harness in tests/interop/go.

``ensure_built()`` runs ``tests/interop/go/build.sh`` (a no-op while the binary is up to date);
``run(host, args)`` runs ``bin/harness`` inside a client host and returns its JSON events;
``popen(host, args, out)`` starts a long-running one (a consumer) writing events to ``out``.

The Go 5.x gRPC client (github.com/apache/rocketmq-clients/golang/v5) has its own harness in
tests/interop/go5: ``ensure_built5()`` builds it (``tests/interop/go5/build.sh``), ``BINARY5`` is it.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Sequence

from tests.interop.jvm import Events, _parse_lines

GO_DIR = Path(__file__).resolve().parent / "go"
BINARY = GO_DIR / "bin" / "harness"
CLIENT_VERSION = "v2.1.2"  # github.com/apache/rocketmq-client-go/v2, see go/go.mod
GO5_DIR = Path(__file__).resolve().parent / "go5"
BINARY5 = GO5_DIR / "bin" / "harness"
CLIENT5_VERSION = "v5.1.2"  # github.com/apache/rocketmq-clients/golang/v5, see go5/go.mod

_lock = threading.Lock()
_built: set[Path] = set()


class GoHarnessError(RuntimeError):
    def __init__(self, message: str, events: Events):
        super().__init__(message)
        self.events = events


def available(binary: Path = BINARY) -> bool:
    """True when the harness is built or can be (a Go toolchain is on PATH)."""
    return binary.exists() or shutil.which("go") is not None


def _ensure(directory: Path, binary: Path, timeout: float) -> Path:
    with _lock:
        if directory not in _built:
            proc = subprocess.run(["bash", str(directory / "build.sh")], capture_output=True, text=True,
                                  timeout=timeout)
            if proc.returncode != 0:
                raise RuntimeError(f"tests/interop/{directory.name}/build.sh failed ({proc.returncode}):\n"
                                   f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
            _built.add(directory)
    return binary


def ensure_built(timeout: float = 900) -> Path:
    return _ensure(GO_DIR, BINARY, timeout)


def ensure_built5(timeout: float = 900) -> Path:
    return _ensure(GO5_DIR, BINARY5, timeout)


def _events(stdout: str, returncode: int, stderr: str, cmd: list[str]) -> Events:
    events = Events(_parse_lines(stdout))
    events.returncode, events.stderr, events.cmd = returncode, stderr, cmd
    return events


def run(host, args: Sequence[str], timeout: float = 90, check: bool = True) -> Events:
    """Run ``harness ARGS`` inside ``host``; returns its events (one dict a JSON line)."""
    cmd = [str(ensure_built()), *[str(a) for a in args]]
    proc = host.run(cmd, timeout=timeout, stdin=subprocess.DEVNULL, cwd=str(GO_DIR))
    events = _events(proc.stdout, proc.returncode, proc.stderr, cmd)
    if check and proc.returncode != 0:
        raise GoHarnessError(f"go harness {args[0]} exited {proc.returncode}\nerrors: "
                             f"{json.dumps(events.errors)[:3000]}\ndone: {events.done}\n"
                             f"stderr:\n{proc.stderr[-3000:]}", events)
    return events


def popen(host, args: Sequence[str], out: Path, err: Path | None = None) -> subprocess.Popen:
    """Start ``harness ARGS`` inside ``host`` in the background; events go to ``out``."""
    cmd = [str(ensure_built()), *[str(a) for a in args]]
    fh = open(out, "w")
    eh = open(err, "w") if err is not None else subprocess.DEVNULL
    try:
        return host.popen(cmd, cwd=str(GO_DIR), stdin=subprocess.DEVNULL, stdout=fh, stderr=eh)
    finally:
        fh.close()
        if err is not None:
            eh.close()


def read_events(path: Path) -> Events:
    return Events(_parse_lines(path.read_text()))
