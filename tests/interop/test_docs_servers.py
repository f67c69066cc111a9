"""The documented server start lines, run as written (issue 30): every block of README.md and docs/*.md
whose lines start servers (``twistd``, ``mqnamesrv``, ``mqbroker``, ``mqcontroller``) with the config
files of this checkout's ``conf/``.

Each block runs verbatim, its lines together as a reader runs them in several terminals, in a private
network and mount namespace (``unshare -rmn``: the documented ports 9876, 10911, 9878 ... are the
namespace's own, and a tmpfs takes what a config keeps under /tmp, as the controllers' do), from a copy of
``conf/`` (relative store directories land beside it) with ``HOME`` a fresh directory (the default
store ``~/store``). What a reader would check next must hold: every broker of the block registered with
its name server (masters and slaves), or, for controllers alone, one of them the Raft leader. Then
SIGTERM to every server, and each must end cleanly (its shutdown logged, no traceback).

A block whose ``-c`` file is the reader's own (``-c broker.conf``) gets the sample of that name from
``conf/``, which docs/operations.md tells the reader to start from. A ``twistd`` line without ``-n``
daemonizes as documented: it is stopped through its pidfile (``--pidfile``, else ``<tap>.pid`` in the
working directory) and its log is its ``--logfile`` (else ``twistd.log``). The package-install lines
are test_wheel_install's.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_docs_blocks import CASES

pytestmark = pytest.mark.interop
ROOT = Path(__file__).resolve().parents[2]
SERVER = re.compile(r"^(twistd\s|mqnamesrv\b|mqbroker\b|mqcontroller\b)")


def _config_files(line: str) -> list[str]:
    return re.findall(r"(?:^|\s)-c\s+(\S+)", line)


def _sample(conf: str) -> Path | None:
    """The file of conf/ a documented ``-c`` file is: itself (``conf/...``), or for the reader's own
    (a bare name) the sample of that name."""
    if conf.startswith("conf/"):
        return ROOT / conf if (ROOT / conf).is_file() else None
    return ROOT / "conf" / conf if "/" not in conf and (ROOT / "conf" / conf).is_file() else None


def server_blocks() -> list[tuple[str, list[str]]]:
    """(where, server lines without their comments) of each block that starts servers from conf/ or
    from a config file of the reader's named as one of conf/'s samples."""
    out = []
    for path, number, lines in CASES:
        servers = [line.split("  #")[0].strip() for line in lines if SERVER.match(line.strip())]
        if servers and all(_sample(c) for line in servers for c in _config_files(line)):
            out.append((f"{path}:{number}", servers))
    return out


def daemon(line: str) -> tuple[str, str] | None:
    """(pidfile, log file) of a ``twistd`` line that daemonizes (no ``-n``/``--nodaemon``), else None."""
    words = line.split()
    if words[0] != "twistd":
        return None
    at = next(i for i, w in enumerate(words) if i and not w.startswith("-"))  # the tap: its options follow it
    tap, own = words[at], words[1:at]  # twistd's own options come before it (a broker's -n is namesrvAddr)
    if "-n" in own or "--nodaemon" in own:
        return None
    opts = dict(w[2:].split("=", 1) for w in own if w.startswith("--") and "=" in w)
    return opts.get("pidfile", f"{tap}.pid"), opts.get("logfile", "twistd.log")


BLOCKS = server_blocks()

#: run inside the namespace once the servers are started: waits for what the block should show, prints it
PROBE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from rmqpy.protocol.codes import RequestCode
from tests.interop import jvm
from tests.interop.test_run_sh import _registered
brokers, controllers = int(sys.argv[2]), json.loads(sys.argv[3])
deadline = time.time() + 60
while True:
    if brokers:
        seen = sorted(_registered("127.0.0.1:9876"))
        done = len(seen) >= brokers
    else:
        seen = []
        for addr in controllers:
            try:
                code, _r, ext, _b = jvm.remoting_request(addr, RequestCode.CONTROLLER_GET_METADATA_INFO, timeout=2)
            except (OSError, ValueError):
                continue
            if code == 0 and ext.get("isLeader") == "true":
                seen.append(addr)
        done = len(seen) == 1
    if done or time.time() > deadline:
        print(json.dumps(seen))
        break
    time.sleep(0.5)
"""


def _tmp_dirs(lines: list[str]) -> list[str]:
    """The directories right under /tmp that the block's config files name (a tmpfs is mounted on each)."""
    found = set()
    for line in lines:
        for conf in _config_files(line):
            found.update(re.findall(r"=\s*(/tmp/[^/\s]+)", _sample(conf).read_text()))  # type: ignore[union-attr]
    return sorted(found)


def _controller_addrs(lines: list[str]) -> list[str]:
    """The remoting addresses of the controllers the block starts (their config's listenPort... or
    the peer list of controllerDLegerPeers, which names each)."""
    addrs = []
    for line in lines:
        for conf in _config_files(line):
            text = _sample(conf).read_text()  # type: ignore[union-attr]
            self_id = re.search(r"^controllerDLegerSelfId\s*=\s*(\S+)", text, re.M)
            peers = re.search(r"^controllerDLegerPeers\s*=\s*(\S+)", text, re.M)
            if self_id and peers:
                addrs += [p.split("-", 1)[1] for p in peers.group(1).split(";") if p.split("-", 1)[0] == self_id.group(1)]
    return addrs


@pytest.mark.skipif(not BLOCKS, reason="no documented server block")
@pytest.mark.parametrize("where,lines", BLOCKS, ids=[w for w, _ in BLOCKS])
def test_documented_servers_start_as_written(where: str, lines: list[str], tmp_path: Path) -> None:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rmn", "true"], capture_output=True).returncode:
        pytest.skip("unshare -rmn is not available: the documented ports cannot be given a namespace of their own")
    brokers = sum(1 for line in lines if "rmq-broker" in line or line.startswith("mqbroker"))
    assert all(d is None or d[0] != e[0] for i, d in enumerate(map(daemon, lines)) for e in
               map(daemon, lines[i + 1:]) if d and e), (where, "two daemons with one pidfile")
    controllers = _controller_addrs([line for line in lines if "mqcontroller" in line or "rmq-controller" in line])
    work, home = tmp_path / "run", tmp_path / "home"
    shutil.copytree(ROOT / "conf", work / "conf")
    for conf in {c for line in lines for c in _config_files(line) if not c.startswith("conf/")}:
        shutil.copy(ROOT / "conf" / conf, work / conf)  # the reader's own, made from the sample
    home.mkdir()
    daemons = [daemon(line) for line in lines]
    # a daemon's output is its log file; a foreground server's, what the shell redirects
    logs = [work / d[1] if d else tmp_path / f"server-{i}.out" for i, d in enumerate(daemons)]
    starts = "\n".join(f"{line} > {tmp_path}/start-{i}.out 2>&1\ndaemons=\"$daemons {d[0]}\"" if d else
                       f"{line} > {log} 2>&1 &\npids=\"$pids $!\""
                       for i, (line, log, d) in enumerate(zip(lines, logs, daemons)))
    made = [d for d in _tmp_dirs(lines) if not Path(d).exists()]
    for d in made:
        Path(d).mkdir()  # a mount point; the tmpfs on it is the namespace's, the directory is removed after
    mounts = "".join(f"mount -t tmpfs tmpfs {d}\n" for d in _tmp_dirs(lines))
    # a daemon is waited for by its pidfile: its process gone (it removes the file as it ends)
    stop_daemons = ("for f in $daemons; do p=$(cat $f); kill -TERM $p; while kill -0 $p 2>/dev/null; do sleep 0.1; "
                    "done; status=\"$status 0\"; done\n")
    script = (f"set -u\n{mounts}ip link set lo up\ncd {work}\npids=\ndaemons=\n{starts}\n"
              f"{sys.executable} -c \"$PROBE\" {ROOT} {brokers} '{json.dumps(controllers)}'\n"
              "status=\n" + stop_daemons +
              "kill -TERM $pids\nfor p in $pids; do wait $p; status=\"$status $?\"; done\necho \"exit$status\"\n")
    bin_dir = Path(sys.executable).parent  # where pip put mqnamesrv, mqbroker, mqcontroller and twistd
    env = {"HOME": str(home), "PATH": f"{bin_dir}:/usr/bin:/bin", "LANG": "C.UTF-8", "PROBE": PROBE}
    try:
        run = subprocess.run(["unshare", "-rmn", "bash", "-c", script], env=env, capture_output=True, text=True,
                             timeout=180)
    finally:
        for d in made:
            Path(d).rmdir()
        for pidfile in (work / d[0] for d in daemons if d):  # a daemon the script did not stop (it failed)
            if pidfile.exists() and pidfile.read_text().strip().isdigit():
                try:
                    os.kill(int(pidfile.read_text()), signal.SIGKILL)
                except ProcessLookupError:
                    pass
    said = "\n".join(f"--- {line}\n{log.read_text()[-1500:] if log.exists() else ''}" for line, log in zip(lines, logs))
    out = run.stdout.strip().splitlines()
    # each server ended by the SIGTERM: twistd stops its reactor and then ends by the signal it got
    # (status 143, as a JVM stopped by SIGTERM), having logged its shutdown, without a traceback
    assert len(out) >= 2 and out[-1].startswith("exit "), (where, run.stdout, run.stderr[-2000:], said)
    assert set(out[-1].split()[1:]) <= {"0", "143"}, (where, out[-1], said)
    for line, log in zip(lines, logs):
        text = log.read_text()
        assert "Server Shut Down." in text and "Traceback" not in text, (where, line, text[-3000:])
    seen = json.loads(out[-2])
    if brokers:
        assert len(seen) == brokers, (where, seen, said)
    else:
        assert len(seen) == 1 and seen[0] in controllers, (where, seen, controllers, said)
