"""Class-data sharing for the suite's JVMs: each class path's classes are loaded and verified once.

Every official client, ``mqadmin`` call and Java server of the interop suite is a JVM of its own,
and on a 2-core machine their start-ups are much of what the suite waits for. JDK 17 can keep the
classes a JVM loaded in an archive (AppCDS, ``-XX:ArchiveClassesAtExit``) that later JVMs of the
same class path map instead of parsing and verifying the jars again: a 5.3.3 producer sending 20
messages took 1.45 s of CPU without and 1.0 s with one (4.9.8: 1.05 s and 0.65 s), measured with
``getrusage`` over three rounds each.

How an archive comes to be, per class path (the key), in ``tests/interop/java/target/cds/``:

* no archive yet: the next JVM of that key is started with ``-XX:ArchiveClassesAtExit`` and writes
  ``KEY.<unique>.part`` when it exits (a JVM killed with SIGKILL writes nothing; the next one tries);
* a later JVM of that key finds the part, and adopts it (renames it to ``KEY.jsa``) only once no
  process has it open any more and a throw-away ``java -Xshare:on -XX:+VerifySharedSpaces`` maps
  it: a partial archive makes the JVM that maps it die of SIGBUS, so none is ever used unchecked;
* with ``KEY.jsa`` present, JVMs start with ``-XX:SharedArchiveFile``; the JVM falls back to
  loading from the jars by itself if the archive does not match (CDS messages are switched off:
  they would go to the harness's stdout, which the tests parse).

The directory lives in the checkout, so a new clone starts without archives and builds its own
(paths and jar times are part of what the JVM checks). ``RMQPY_INTEROP_CDS=off`` turns it off.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import time
from pathlib import Path

DIR = Path(__file__).resolve().parent / "java" / "target" / "cds"
#: a part nobody adopted within this time was left by a JVM that died: another JVM may try again
STALE_PART_SECONDS = 300.0
#: JVM options an archive depends on (the others, heap size and system properties, do not matter)
_DUMP_RELEVANT = ("-XX:+UseSerialGC",)
#: the archive's own messages are off: a mismatch is reported on stdout, which harnesses write JSON to
QUIET = "-Xlog:cds*=off"


def enabled() -> bool:
    return os.environ.get("RMQPY_INTEROP_CDS", "on") != "off"


def key(java: str, classpath: str, main: str = "") -> str:
    return hashlib.sha256("\0".join([java, classpath, *_DUMP_RELEVANT, *([main] if main else [])]).encode()
                          ).hexdigest()[:20]


def options(java: str, classpath: str) -> list[str]:
    """The archive options for one JVM of ``classpath``: use the archive, or write it, or none."""
    opts, part = _options(java, classpath, key(java, classpath))
    return [QUIET, f"-XX:ArchiveClassesAtExit={part}"] if part else opts


def server_options(java: str, classpath: str, main: str) -> tuple[list[str], Path | None]:
    """The archive options for a server JVM, and the part to dump it into once it is up (or None).

    The suite stops most servers with SIGKILL, and a killed JVM writes nothing at exit; so the
    first server of a key records what it needs for a dump, and :func:`dump_running` asks it for
    the archive just before it is stopped or killed (``jcmd VM.cds dynamic_dump``; the JVM pauses
    for it, which must not fall inside a scenario). Name server and broker share their jars but
    not their classes: the main class is part of the key."""
    opts, part = _options(java, classpath, key(java, classpath, main))
    return ([QUIET, "-XX:+RecordDynamicDumpInfo"], part) if part else (opts, None)


def dump_running(java: str, pid: int, part: Path, timeout: float = 60.0) -> bool:
    """Have the running JVM ``pid`` write its archive into ``part`` (``jcmd VM.cds dynamic_dump``);
    True when jcmd says it did. A JVM that dies meanwhile leaves a part that :func:`_adopt_a_part`
    finds broken and removes."""
    jcmd = Path(java).resolve().parent / "jcmd"
    if not jcmd.exists():
        return False
    try:
        done = subprocess.run([str(jcmd), str(pid), "VM.cds", "dynamic_dump", str(part)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def _options(java: str, classpath: str, k: str) -> tuple[list[str], Path | None]:
    """([options to use the archive], None), or ([], a part to write), or ([], None)."""
    if not enabled():
        return [], None
    archive = DIR / f"{k}.jsa"
    if not archive.exists():
        _adopt_a_part(java, classpath, k, archive)
    if archive.exists():
        return [QUIET, f"-XX:SharedArchiveFile={archive}"], None
    return [], _claim_a_part(k)


def _parts(k: str) -> list[Path]:
    return sorted(DIR.glob(f"{k}.*.part")) if DIR.exists() else []


def _claim_a_part(k: str) -> Path | None:
    """A new part's path, unless a JVM may still be writing one (then this JVM runs without)."""
    now = time.time()
    for p in _parts(k):
        try:
            age = now - p.stat().st_mtime
        except FileNotFoundError:
            continue
        if age < STALE_PART_SECONDS:
            return None
        p.unlink(missing_ok=True)
    pending = DIR / f"{k}.pending"
    DIR.mkdir(parents=True, exist_ok=True)
    try:  # a JVM that was given a part but has not written it yet (it writes at exit)
        if now - pending.stat().st_mtime < STALE_PART_SECONDS:
            return None
    except FileNotFoundError:
        pass
    pending.touch()
    return DIR / f"{k}.{os.getpid()}-{int(now * 1000)}.part"


def _adopt_a_part(java: str, classpath: str, k: str, archive: Path) -> None:
    for part in _parts(k):
        if _open_by_a_process(part):
            continue
        if _maps(java, classpath, part):
            try:
                os.rename(part, archive)
            except FileNotFoundError:  # another worker adopted it first
                pass
            return
        part.unlink(missing_ok=True)  # left by a JVM that died while writing it


def _open_by_a_process(path: Path) -> bool:
    target = str(path)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return True
            except OSError:
                continue
    return False


def _maps(java: str, classpath: str, part: Path) -> bool:
    """True when a JVM of ``classpath`` maps ``part`` and its checksums hold (in a JVM of its own:
    a truncated archive kills the JVM that maps it)."""
    with tempfile.TemporaryDirectory(prefix="rmqpy-cds-") as scratch:
        try:
            done = subprocess.run(
                [java, *_DUMP_RELEVANT, "-Xshare:on", "-XX:+VerifySharedSpaces", f"-XX:SharedArchiveFile={part}",
                 "-XX:ErrorFile=/dev/null", "-cp", classpath, "-version"],
                cwd=scratch, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                timeout=60)
        except subprocess.TimeoutExpired:
            return False
    return done.returncode == 0
