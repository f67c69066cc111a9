"""The commands and configuration blocks of README.md, docs/*.md and spark/README.md still name what
exists (issue 30: documentation that rots). Without starting anything:

* every command line starts with a program a reader has here (:data:`PROGRAMS`);
* ``rmqpy-admin`` lines parse with rmqpy-admin's own argument parser (sub-command and options);
* ``twistd`` lines name one of rmqpy's taps; ``python -m rmqpy...`` modules import;
* paths into this repository (``conf/``, ``bench/``, ``container/``, ...) exist;
* every key of a ``key=value`` block is one docs/configuration.md lists (a misspelt or removed key is
  silently ignored by a server, so a reader would never know).

The Python blocks that talk to servers run in tests/interop/test_python_client.py; the README's two
commands run in tests/interop/test_run_sh.py and test.sh itself; every documented ``rmqpy-admin`` and
``curl`` line runs against a live cluster in tests/interop/test_docs_commands.py.
"""
from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "spark" / "README.md"]
#: generated tables: their rows are not blocks a reader types
GENERATED = {"configuration.md", "request-codes.md", "compatibility.md"}
#: programs a documented command may start with: rmqpy's own, the machine's, and the Java/container tools
PROGRAMS = {
    "mqnamesrv", "mqbroker", "mqcontroller", "rmqpy-admin", "rmqpy-healthcheck", "twistd", "python", "python3",
    "pip", "./run.sh", "./test.sh", "bash", "sh", "curl", "docker", "podman", "podman-compose", "mvn", "java",
    "mqadmin", "sh mqadmin", "git", "cd", "mkdir", "cat", "export", "kill", "ulimit", "prlimit", "openssl", "ls",
    "tail", "grep", "sudo", "systemctl", "pkill", "echo", "source", ".", "env", "taskset", "nohup", "spark-submit",
    "unzip", "tar", "cp", "ip", "JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64",
}
TAPS = {"rmq-namesrv", "rmq-broker", "rmq-controller"}
REPO_PATH = re.compile(r"^(conf|bench|container|tests|spark|docs|rmqpy|twisted|tools)/[\w./-]*$")
KEY_LINE = re.compile(r"^([A-Za-z][\w.]*)\s*=")


def _blocks(path: Path) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each code block: fenced, or indented 4 spaces after a blank line."""
    lines = path.read_text().splitlines()
    out: list[tuple[int, list[str]]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            lang = line[3:].strip()
            if lang in ("", "sh", "bash", "shell", "console", "properties", "ini"):
                out.append((i + 2, lines[i + 1:j]))
            i = j + 1
            continue
        if line.startswith("    ") and not line.startswith("     ") and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            out.append((i + 1, [x[4:] for x in lines[i:j]]))
            i = j
            continue
        i += 1
    return out


def _commands(block: list[str]) -> list[str]:
    """A block's command lines: continuations joined, comments and heredoc bodies dropped."""
    out: list[str] = []
    pending = ""
    heredoc: str | None = None
    for raw in block:
        line = raw.rstrip()
        if heredoc is not None:
            if line.strip() == heredoc:
                heredoc = None
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        m = re.search(r"<<-?\s*'?(\w+)'?", full)
        if m:
            heredoc = m.group(1)
        out.append(full)
    return out


def _words(command: str) -> list[str]:
    text = re.sub(r"\s#\s.*$", "", command)  # a trailing comment (spaced '#', as the docs write them)
    text = re.sub(r"<[^<>]*>", "X", text)  # <placeholders>
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _pieces(words: list[str]) -> list[list[str]]:
    """The simple commands of a line split on && ; | (and a leading VAR=value dropped)."""
    out: list[list[str]] = [[]]
    for w in words:
        if w in ("&&", "||", ";", "|", "&"):
            out.append([])
        else:
            out[-1].append(w)
    pieces = []
    for p in out:
        while p and re.match(r"^[A-Z_][A-Z0-9_]*=", p[0]) and p[0] not in PROGRAMS:
            p = p[1:]
        if p:
            pieces.append(p)
    return pieces


def _is_shell(block: list[str]) -> bool:
    cmds = _commands(block)
    if not cmds:
        return False
    first = _words(cmds[0])
    return bool(first) and (first[0] in PROGRAMS or first[0].startswith("./")
                            or first[0].endswith(("mqcontroller", "mqbroker", "mqnamesrv", "pip")))


def _is_properties(block: list[str]) -> bool:
    body = [x.strip() for x in block if x.strip() and not x.strip().startswith("#")]
    return bool(body) and all(KEY_LINE.match(x) for x in body) and not any(" " in x.split("=")[0] for x in body)


def _known_keys() -> set[str]:
    text = (ROOT / "docs" / "configuration.md").read_text()
    return set(re.findall(r"^\| `([^`]+)` \|", text, re.M))


def _admin_error(argv: list[str]) -> str | None:
    import contextlib
    import io

    from rmqpy.tools import admin
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            admin.parser().parse_args(argv)
    except SystemExit as exc:
        return err.getvalue().strip() or f"exit {exc.code}"
    return None


def _check_piece(piece: list[str]) -> list[str]:
    problems: list[str] = []
    prog = piece[0]
    name = Path(prog).name if "/" in prog and not prog.startswith("./") else prog
    if name not in PROGRAMS and not prog.startswith("./"):
        return [f"unknown program {prog!r}"]
    if prog.startswith("./") and not (ROOT / prog[2:]).exists():
        problems.append(f"{prog} does not exist")
    if name == "rmqpy-admin":
        error = _admin_error(piece[1:])
        if error is not None:
            problems.append(f"rmqpy-admin refuses it: {error.splitlines()[-1]}")
    if name == "twistd":
        taps = [w for w in piece[1:] if w.startswith("rmq-")]
        if not taps or any(t not in TAPS for t in taps):
            problems.append(f"no rmqpy tap in {' '.join(piece)!r}")
    if name in ("python", "python3") and "-m" in piece:
        module = piece[piece.index("-m") + 1] if piece.index("-m") + 1 < len(piece) else ""
        if module.startswith(("rmqpy", "tests", "bench")) and importlib.util.find_spec(module.split(":")[0]) is None:
            problems.append(f"no module {module}")
    for w in piece[1:]:
        candidate = w.split("=", 1)[-1].rstrip(".,;:)")
        if REPO_PATH.match(candidate) and "X" not in candidate and "*" not in candidate \
                and not (ROOT / candidate).exists():
            problems.append(f"no file {candidate}")
    return problems


def _cases() -> list[tuple[str, int, list[str]]]:
    cases = []
    for path in DOCS:
        if path.name in GENERATED:
            continue
        for line, block in _blocks(path):
            cases.append((str(path.relative_to(ROOT)), line, block))
    return cases


CASES = _cases()


def test_the_blocks_are_found() -> None:
    shell = [c for c in CASES if _is_shell(c[2])]
    props = [c for c in CASES if _is_properties(c[2])]
    assert len(shell) >= 18 and len(props) >= 4, (len(shell), len(props))


@pytest.mark.parametrize("where,line,block", [c for c in CASES if _is_shell(c[2])],
                         ids=lambda v: str(v) if not isinstance(v, list) else "")
def test_each_command_names_what_exists(where: str, line: int, block: list[str]) -> None:
    problems = []
    for command in _commands(block):
        for piece in _pieces(_words(command)):
            problems += [f"{where}:{line}: {p}" for p in _check_piece(piece)]
    assert problems == []


KNOWN = _known_keys()


@pytest.mark.parametrize("where,line,block", [c for c in CASES if _is_properties(c[2])],
                         ids=lambda v: str(v) if not isinstance(v, list) else "")
def test_each_configuration_key_is_one_rmqpy_lists(where: str, line: int, block: list[str]) -> None:
    keys = [m.group(1) for x in block if (m := KEY_LINE.match(x.strip()))]
    unknown = [k for k in keys if k not in KNOWN and not k.startswith(("tls.", "rocketmq."))]
    assert unknown == [], f"{where}:{line}: keys docs/configuration.md does not list"


def test_the_checker_refuses_what_has_rotted() -> None:
    """A renamed sub-command or option, a tap, a file, a program or a misspelt key is caught."""
    def problems(command: str) -> list[str]:
        return [p for piece in _pieces(_words(command)) for p in _check_piece(piece)]

    assert problems("mqbroker -c conf/broker.conf -n 127.0.0.1:9876") == []
    assert problems("rmqpy-admin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t <topic>") == []
    for rotten in ("rmqpy-admin updateTopc -n 1:2 -t T", "rmqpy-admin updateTopic -t T --bogus 1",
                   "twistd -n rmq-brokr -c conf/broker.conf", "mqbroker -c conf/nope.conf", "rmqpyadmin clusterList",
                   "python3 -m rmqpy.tools.nothere", "cd /tmp && ./nothere.sh"):
        assert problems(rotten), rotten
    assert "brokerClusterName" in KNOWN and "brokerClusterNme" not in KNOWN
