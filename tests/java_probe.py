"""Small Java programs compiled against Apache RocketMQ 5.3.3's server jars
(``tests/interop/java/target/lib-5.3.3-server``, made by ``tests/interop/java/build.sh``) and run
by a test: Apache's own classes write or read what rmqpy reads or writes."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

TARGET = Path(__file__).resolve().parent / "interop" / "java" / "target"
SERVER_LIB = TARGET / "lib-5.3.3-server"


def available() -> bool:
    return SERVER_LIB.is_dir() and shutil.which("javac") is not None


def compile_probe(src: Path) -> Path:
    """The directory of ``src``'s classes, compiled once per version of the source (two test
    workers compiling at once each use a directory of their own and the first rename wins)."""
    out = TARGET / f"{src.stem.lower()}-{hashlib.sha256(src.read_bytes()).hexdigest()[:12]}"
    if not (out / f"{src.stem}.class").exists():
        tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        subprocess.run(["javac", "-d", str(tmp), "-cp", f"{SERVER_LIB}/*", str(src)], check=True, timeout=120)
        try:
            tmp.rename(out)
        except OSError:  # the other one was first
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def classpath(classes: Path) -> str:
    return f"{classes}{os.pathsep}{SERVER_LIB}/*"
