"""Official clients run on their own client host (network namespace), as the suite requires."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Sequence

from tests.interop import jvm
from tests.interop.waiting import wait_until


def mqadmin(host, version: str, args: Sequence[str], namesrv_addr: str, timeout: float = 90,
            sysprops: dict[str, str] | None = None, expect_output: bool = False) -> str:
    """Run mqadmin inside ``host``; returns stdout (mqadmin exits 0 on most errors: read it). A
    sub-command that fails prints its exception's stack trace on stderr, nothing on stdout, and exits
    0 (MQAdminStartup): with ``expect_output`` that is an AssertionError that shows the stack trace.

    MQAdminStartup runs unchanged through the harness' FastExit launcher (as :func:`jvm.mqadmin`
    does), which only cuts the 3-6 s that the remoting client's shutdown and netty's quiet period
    spend before the JVM ends (measured 7 s -> 1 s for a 5.3.3 clusterList)."""
    jvm.ensure_built()
    args = [str(a) for a in args]
    args = [args[0], "-n", namesrv_addr, *args[1:]]
    home = jvm.default_home()
    props = {"rmq.logback.configurationFile": "rmq.tools.logback.xml", **(sysprops or {})}
    cmd = jvm.java_cmd(version, jvm.FASTEXIT_MAIN, [jvm.MQADMIN_MAIN, *args], props, kind="harness", home=home)
    proc = host.run(cmd, timeout=timeout, cwd=str(home), env=jvm._env(home), stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"mqadmin {args[0]} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert not expect_output or proc.stdout.strip(), f"mqadmin {args[0]} failed:\n{proc.stderr[-3000:]}"
    return proc.stdout


#: what separates the commands of :func:`mqadmin_batch` on the launcher's command line
_BATCH_SEP = "--mqadmin-batch-next--"
MQADMIN_BATCH_MAIN = "io.rmqpy.interop.harness.MQAdminBatch"


def mqadmin_batch(host, version: str, commands: Sequence[Sequence[str]], namesrv_addr: str,
                  timeout: float = 120) -> list[str]:
    """Runs several mqadmin commands one after the other in one JVM inside ``host`` (the harness'
    MQAdminBatch: MQAdminStartup.main once per command, each unchanged) and returns each one's
    stdout. For set-up (topics and groups): one JVM start instead of one per command (about 1 s
    of CPU each, measured 0.6-1.5 s of wall time per updateTopic)."""
    jvm.ensure_built()
    argv: list[str] = []
    for command in commands:
        args = [str(a) for a in command]
        argv += [_BATCH_SEP, args[0], "-n", namesrv_addr, *args[1:]]
    home = jvm.default_home()
    props = {"rmq.logback.configurationFile": "rmq.tools.logback.xml"}
    cmd = jvm.java_cmd(version, MQADMIN_BATCH_MAIN, [jvm.MQADMIN_MAIN, _BATCH_SEP, *argv[1:]], props, kind="harness",
                       home=home)
    proc = host.run(cmd, timeout=timeout, cwd=str(home), env=jvm._env(home), stdin=subprocess.DEVNULL)
    outs, rest = [], proc.stdout
    for n in range(len(commands)):
        out, found, rest = rest.partition(f"#mqadmin-batch-end {n}\n")
        assert found, (f"mqadmin batch exited {proc.returncode} before the end of command {n} "
                       f"{list(commands[n])}:\n{proc.stdout}\n{proc.stderr[-3000:]}")
        outs.append(out)
    assert proc.returncode == 0, f"mqadmin batch exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    return outs


def harness(host, version: str, args: Sequence[str], timeout: float = 120, check: bool = True,
            sysprops: dict[str, str] | None = None) -> jvm.Events:
    """Run our Java harness (the official client inside) in ``host``; returns its JSON events."""
    home = jvm.default_home()
    cmd = jvm.harness_cmd(version, args, home=home, sysprops=sysprops)
    proc = host.run(cmd, timeout=timeout, cwd=str(home), env=jvm._env(home), stdin=subprocess.DEVNULL)
    events = jvm.Events(jvm._parse_lines(proc.stdout))
    events.returncode, events.stderr, events.cmd = proc.returncode, proc.stderr, cmd
    if check and proc.returncode != 0:
        raise jvm.HarnessError(f"harness {args[0]} exited {proc.returncode}\nerrors: "
                               f"{json.dumps(events.errors)[:3000]}\nstderr:\n{proc.stderr[-3000:]}", events)
    return events


def harness_popen(host, version: str, args: Sequence[str], out: Path,
                  sysprops: dict[str, str] | None = None) -> subprocess.Popen:
    """Start a long-running harness (a consumer) in ``host``; events go to ``out``."""
    home = jvm.default_home()
    cmd = jvm.harness_cmd(version, args, home=home, sysprops=sysprops)
    fh = open(out, "w")
    return host.popen(cmd, cwd=str(home), env=jvm._env(home), stdin=subprocess.DEVNULL, stdout=fh,
                      stderr=subprocess.DEVNULL)


def read_events(path: Path) -> jvm.Events:
    return jvm.Events(jvm._parse_lines(path.read_text()))


class BackgroundHarness:
    """A long-running harness (a consumer) in ``host``; its events go to the file ``out``."""

    def __init__(self, host, version: str, args: Sequence[str], out: Path) -> None:
        self.out = out
        self.proc = harness_popen(host, version, args, out)

    def events(self) -> jvm.Events:
        return read_events(self.out)

    def wait_for(self, name: str, timeout: float) -> dict:
        """The first ``name`` event; fails if none came within ``timeout`` s or the harness exited."""
        def found() -> list[dict]:
            events = self.events().of(name)
            if not events and self.proc.poll() is not None:
                raise AssertionError(self._no_event(name, timeout))
            return events

        events = wait_until(found, timeout, 0.1)
        if not events:
            raise AssertionError(self._no_event(name, timeout))
        return events[0]

    def _no_event(self, name: str, timeout: float) -> str:
        return f"no {name!r} event within {timeout}s (exit {self.proc.poll()}): {self.events()[-5:]}"

    def collect(self, timeout: float) -> jvm.Events:
        """All its events once it exits (killed after ``timeout`` s), with its exit code."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
        ev = self.events()
        ev.returncode = self.proc.returncode
        return ev

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> "BackgroundHarness":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
