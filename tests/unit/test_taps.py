"""Each tap (``twistd rmq-broker``, ``twistd rmq-namesrv``) builds a service that starts and stops on
the real reactor and leaves no DelayedCall behind, and no thread once the reactor has stopped (its
thread pool is the reactor's). Run in a child process: the test process's reactor is never run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.ports import free_port

PROBE = textwrap.dedent("""
    import json, sys, threading
    from twisted.internet import reactor, defer
    from twisted.python import log
    tap_name, args = sys.argv[1], sys.argv[2:]
    if tap_name == "broker":
        from rmqpy.broker import tap
        options = tap.Options()
    else:
        from rmqpy.namesrv import tap
        options = tap.Options()
    options.parseOptions(args)
    top = tap.makeService(options)
    threads_before = {t.name for t in threading.enumerate()}
    out = {}

    @defer.inlineCallbacks
    def run():
        try:
            top.privilegedStartService()
            top.startService()
            out["children"] = [s.name or type(s).__name__ for s in top]
            yield defer.maybeDeferred(top.stopService)
            d = defer.Deferred()
            reactor.callLater(0.2, d.callback, None)  # closed ports and connections settle
            yield d
            out["delayed"] = [repr(c) for c in reactor.getDelayedCalls() if c.active()]
        except Exception as exc:
            out["error"] = repr(exc)
        finally:
            reactor.stop()

    reactor.callWhenRunning(run)
    reactor.run(installSignalHandlers=False)
    # the reactor's own thread pool (file writes, name lookups) is joined as the reactor stops
    out["threads"] = sorted({t.name for t in threading.enumerate()} - threads_before)
    print("RESULT " + json.dumps(out))
""")


def _free_port(span: int = 1) -> int:
    """A free port p with p-2..p+span-1 free too."""
    return free_port(range(-2, span))


def _probe(tap_name: str, args: list[str], cwd: Path) -> dict:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""), "HOME": str(cwd)}
    proc = subprocess.run([sys.executable, "-c", PROBE, tap_name, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.parametrize("grpc", [False, True], ids=["remoting", "with-grpc"])
def test_broker_tap_starts_and_stops_clean(tmp_path: Path, grpc: bool) -> None:
    port = _free_port(span=2)
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={tmp_path}/store\nlistenPort={port}\nbindAddress=127.0.0.1\n"
                    f"brokerIP1=127.0.0.1\nmappedFileSizeCommitLog=1048576\nnamesrvAddr=\nlogDir={tmp_path}/logs\n"
                    f"grpcServerPort={_free_port() if grpc else -1}\n")
    out = _probe("broker", ["-c", str(conf)], tmp_path)
    assert "error" not in out, out
    assert out["children"][0] == "broker"
    assert out["delayed"] == [] and out["threads"] == [], out


def test_namesrv_tap_starts_and_stops_clean(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort={_free_port()}\nbindAddress=127.0.0.1\nlogDir={tmp_path}/logs\n"
                    f"kvConfigPath={tmp_path}/kv.json\n")
    out = _probe("namesrv", ["-c", str(conf)], tmp_path)
    assert "error" not in out, out
    assert out["delayed"] == [] and out["threads"] == [], out
