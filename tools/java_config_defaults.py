"""Field defaults of Apache RocketMQ's config classes at several releases, as JSON.

    python3 tools/java_config_defaults.py GIT_DIR [LABEL=SOURCE ...] > rmqpy/tools/java_defaults/initialisers.json

Each LABEL=SOURCE names where one release's source is read from:

* a git ref of GIT_DIR, a clone of apache/rocketmq (e.g. the search tool's
  ``fetch github:apache/rocketmq``): ``5.3.3=rocketmq-all-5.3.3``; the class files are found in the
  ref's tree and read with ``git show``;
* released ``-sources.jar`` files, for a release the clone does not have: a comma-separated list of
  jars (each may be a glob; ``~`` is the home directory), ``5.5.1=a-sources.jar,b-sources.jar``, or
  a directory holding them (every ``*-sources.jar`` below it; all must be of one version). The class
  files are read from the jars with ``zipfile``. A class none of the jars holds is recorded under
  the label's ``unknown_classes``: unlike a git tree, a set of jars does not say the release lacks it.

Without LABEL arguments the labels are DEFAULT_SOURCES: 4.9.7 and 5.3.3 from their tags, 5.5.1 from
the local Maven repository's sources jars, which Maven fetches from Maven Central with

    for a in common remoting store broker namesrv proxy; do
        mvn -q dependency:get -Dtransitive=false -Dartifact=org.apache.rocketmq:rocketmq-$a:5.5.1:jar:sources
    done

(BrokerConfig, BrokerIdentity and NamesrvConfig are in rocketmq-common, NettyServerConfig and
NettyClientConfig in rocketmq-remoting, MessageStoreConfig in rocketmq-store, ProxyConfig in
rocketmq-proxy). GIT_DIR may be ``-`` when every label is a jar source. This is run by hand; the
JSON it writes is committed, and nothing in CI fetches sources.

For each config class (CLASSES) the instance fields declared directly in its body are read and
their initialisers reduced to a value: integer/float arithmetic is evaluated (``60 * 1000`` ->
``60000``), ``true``/``false``/string literals are unquoted, a field without an initialiser gets
Java's zero value, and anything else (a call, a constant of another class) is kept as its source
text between parentheses, marked so by a leading ``=``. Static fields are skipped. The result feeds
``rmqpy.tools.config_table``'s "across releases" table and tests/unit/test_config_defaults.py; it is
data about Java, not Java code.

Why not ``BrokerStartup -p``: it needs each release's jars and prints the running host's values
(CPU counts, addresses); the initialisers say what each release ships, for any tag, from source.
"""
from __future__ import annotations

import ast
import glob
import hashlib
import json
import operator
import os
import re
import subprocess
import sys
import zipfile
from typing import Any, Callable, Protocol

#: config class -> its file, found in the ref's tree by name (main sources only)
CLASSES = ("BrokerConfig", "BrokerIdentity", "MessageStoreConfig", "NettyServerConfig", "NettyClientConfig",
           "NamesrvConfig", "ProxyConfig")
DEFAULT_SOURCES = {
    "4.9.7": "rocketmq-all-4.9.7",
    "5.3.3": "rocketmq-all-5.3.3",
    "5.5.1": "~/.m2/repository/org/apache/rocketmq/rocketmq-*/5.5.1/rocketmq-*-5.5.1-sources.jar",
}

_MODIFIERS = {"private", "protected", "public", "final", "volatile", "transient"}
_ZERO = {"int": "0", "long": "0", "short": "0", "byte": "0", "double": "0.0", "float": "0.0", "boolean": "false",
         "Integer": "", "Long": "", "Boolean": "", "String": ""}
_OPS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Div: operator.truediv, ast.LShift: operator.lshift, ast.USub: operator.neg, ast.UAdd: operator.pos}


def git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "-C", git_dir, *args], check=True, capture_output=True, text=True).stdout


def _class_name(path: str) -> str | None:
    """The config class a source path holds, if it is one of CLASSES (main sources only)."""
    if not path.endswith(".java") or "/src/test/" in path:
        return None
    name = path.rsplit("/", 1)[-1].removesuffix(".java")
    return name if name in CLASSES else None


class Source(Protocol):
    def describe(self) -> dict[str, Any]: ...

    def class_files(self) -> dict[str, str]: ...

    def read(self, path: str) -> str: ...


class GitSource:
    """One ref of a clone of apache/rocketmq."""

    def __init__(self, git_dir: str, ref: str) -> None:
        self.git_dir, self.ref = git_dir, ref

    def describe(self) -> dict[str, Any]:
        return {"ref": self.ref, "commit": git(self.git_dir, "rev-parse", self.ref + "^{commit}").strip()}

    def class_files(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for path in git(self.git_dir, "ls-tree", "-r", "--name-only", self.ref).splitlines():
            name = _class_name(path)
            if name is not None and "/src/main/java/" in path:
                found.setdefault(name, path)
        return found

    def read(self, path: str) -> str:
        return git(self.git_dir, "show", f"{self.ref}:{path}")


_JAR_VERSION = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[^-]*(?:-[A-Za-z]+\w*)?)-sources\.jar$")


class JarSource:
    """Released ``-sources.jar`` files of one version (paths in a jar: ``org/apache/...java``)."""

    def __init__(self, jars: list[str]) -> None:
        if not jars:
            raise SystemExit("no -sources.jar files given")
        versions = set()
        for jar in jars:
            m = _JAR_VERSION.match(os.path.basename(jar))
            if m is None:
                raise SystemExit(f"{jar}: not a NAME-VERSION-sources.jar")
            versions.add(m.group("version"))
        if len(versions) != 1:
            raise SystemExit(f"sources jars of several versions {sorted(versions)}: give one version's jars")
        self.jars = sorted(jars, key=os.path.basename)
        self.version = versions.pop()

    @classmethod
    def from_spec(cls, spec: str) -> JarSource:
        """A directory (every ``*-sources.jar`` below it) or a comma-separated list of jars and globs."""
        path = os.path.expanduser(spec)
        if os.path.isdir(path):
            return cls(glob.glob(os.path.join(path, "**", "*-sources.jar"), recursive=True))
        jars: list[str] = []
        for part in spec.split(","):
            part = os.path.expanduser(part.strip())
            matched = sorted(glob.glob(part)) if glob.has_magic(part) else [part]
            if not matched or not all(os.path.isfile(j) for j in matched):
                raise SystemExit(f"{part}: no such sources jar (fetch it with mvn dependency:get, see --help)")
            jars.extend(matched)
        return cls(jars)

    def describe(self) -> dict[str, Any]:
        jars = {}
        for jar in self.jars:
            with open(jar, "rb") as f:
                jars[os.path.basename(jar)] = hashlib.sha1(f.read()).hexdigest()
        return {"version": self.version, "jars": jars}

    def class_files(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for jar in self.jars:
            with zipfile.ZipFile(jar) as z:
                for name in z.namelist():
                    cls = _class_name("/" + name)
                    if cls is not None:
                        found.setdefault(cls, f"{os.path.basename(jar)}!{name}")
        return found

    def read(self, path: str) -> str:
        jar_name, _, member = path.partition("!")
        jar = next(j for j in self.jars if os.path.basename(j) == jar_name)
        with zipfile.ZipFile(jar) as z:
            return z.read(member).decode("utf-8")


def is_jar_spec(spec: str) -> bool:
    return ".jar" in spec or os.path.isdir(os.path.expanduser(spec))


def source_of(git_dir: str, spec: str) -> Source:
    if is_jar_spec(spec):
        return JarSource.from_spec(spec)
    if git_dir == "-":
        raise SystemExit(f"{spec}: a git ref needs GIT_DIR")
    return GitSource(git_dir, spec)


def _strip_comments(src: str) -> str:
    """Comments out, string literals kept (a ``//`` inside a string is not a comment)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        elif src.startswith("//", i):
            i = src.find("\n", i) if src.find("\n", i) >= 0 else n
        elif src.startswith("/*", i):
            i = src.find("*/", i + 2) + 2 if src.find("*/", i + 2) >= 0 else n
        else:
            out.append(c)
            i += 1
    return "".join(out)


def class_statements(src: str) -> list[str]:
    """The statements at depth 1 of the file's first top-level class: fields (and method headers,
    which the caller discards since they end in a block, not ``;``)."""
    src = _strip_comments(src)
    start = src.index("{", re.search(r"\bclass\s+\w+", src).end())  # type: ignore[union-attr]
    depth, buf, stmts, in_string = 1, [], [], False
    for c in src[start + 1:]:
        if in_string or c == '"':
            if depth == 1:
                buf.append(c)
            in_string = (c != '"') if in_string else True  # literals have no escaped quotes here
            continue
        if c == "{":
            depth += 1
            if depth == 2:
                buf = []  # a method, initializer block or inner class: not a field
            continue
        if c == "}":
            depth -= 1
            if depth == 0:
                break
            continue
        if depth != 1:
            continue
        if c == ";":
            stmts.append(" ".join("".join(buf).split()))
            buf = []
        else:
            buf.append(c)
    return stmts


def _arith(text: str) -> str | None:
    expr = re.sub(r"(?<=\d)[lLfFdD]\b", "", text.replace("_", ""))
    if not re.fullmatch(r"[\d\s.+\-*/()<]+", expr):
        return None
    expr = re.sub(r"(?<![/])/(?![/])", "//", expr) if "." not in expr else expr

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise ValueError(text)

    try:
        return str(ev(ast.parse(expr, mode="eval").body))
    except (SyntaxError, ValueError, ZeroDivisionError):
        return None


_MS = {"MILLIS": 1, "MILLISECONDS": 1, "SECONDS": 1000, "MINUTES": 60_000, "HOURS": 3_600_000, "DAYS": 86_400_000}


def _durations(text: str) -> str:
    """``Duration.ofSeconds(60).toMillis()`` and ``TimeUnit.SECONDS.toMillis(10)`` as arithmetic."""
    text = re.sub(r"Duration\.of(Millis|Seconds|Minutes|Hours|Days)\(([^()]*)\)\.toMillis\(\)",
                  lambda m: f"(({m.group(2)}) * {_MS[m.group(1).upper()]})", text)
    return re.sub(r"TimeUnit\.(MILLISECONDS|SECONDS|MINUTES|HOURS|DAYS)\.toMillis\(([^()]*)\)",
                  lambda m: f"(({m.group(2)}) * {_MS[m.group(1)]})", text)


#: constants of the JDK and of RocksDB (org.rocksdb.util.SizeUnit) that initialisers use as numbers
_NUMBERS = {"Byte.MAX_VALUE": 127, "Short.MAX_VALUE": 32767, "Integer.MAX_VALUE": 2**31 - 1, "Long.MAX_VALUE": 2**63 - 1,
            "SizeUnit.KB": 1024, "SizeUnit.MB": 1024**2, "SizeUnit.GB": 1024**3, "SizeUnit.TB": 1024**4,
            "SizeUnit.PB": 1024**5}


def _numbers(text: str) -> str:
    return re.sub(r"\b(?:Byte|Short|Integer|Long|SizeUnit)\.[A-Z_]+\b",
                  lambda m: str(_NUMBERS.get(m.group(0), m.group(0))), text)


def reduce_value(type_name: str, init: str | None) -> str:
    if init is None:
        return _ZERO.get(type_name, "")
    init = init.strip()
    if init in ("true", "false"):
        return init
    if init == "null":
        return ""
    if re.fullmatch(r'"(?:[^"\\]|\\.)*"', init):
        return init[1:-1]
    value = _arith(_numbers(_durations(init)))
    if value is not None:
        return value
    return "=" + init


#: what an initialiser that depends on the host or on another class comes to, written the way
#: rmqpy's configuration table writes host-dependent defaults; the CPU count stays a name
_SAME = [
    (r"Runtime\.getRuntime\(\)\.availableProcessors\(\)", "PROCESSOR_NUMBER"),
    (r"^=(Remoting|Network)Util\.getLocalAddress\(\)$", "(first non-loopback IPv4 address)"),
    (r"^=(localHostName|defaultBrokerName)\(\)$", "(host name)"),
    (r"^=(MixAll\.ROCKETMQ_HOME_DIR|System\.getProperty\(MixAll\.ROCKETMQ_HOME_PROPERTY, .*\))$", "$ROCKETMQ_HOME"),
    (r"^=System\.getProperty\(MixAll\.NAMESRV_ADDR_PROPERTY, .*\)$", "$NAMESRV_ADDR"),
    (r'^=System\.getProperty\("user\.home"\) \+ (.*)$', "~{1}"),
    (r"^=MixAll\.MASTER_ID$", "0"),
    (r"^=PermName\.PERM_READ \| PermName\.PERM_WRITE$", "6"),
    (r"^=(\w+)\.([A-Z_]+)$", "{2}"),  # an enum constant: MessageRequestMode.PULL -> PULL
]


def _normalise(value: str, constants: dict[str, str]) -> str:
    if not value.startswith("="):
        return value
    if value[1:] in constants:
        return constants[value[1:]]
    for pattern, repl in _SAME:
        m = re.search(pattern, value)
        if m is None:
            continue
        if pattern.startswith("^"):
            if repl.startswith("~"):
                parts = re.findall(r'"([^"]*)"', m.group(1))
                return "~/" + "/".join(parts).lstrip("/")
            return repl.format(*([None] + list(m.groups())))
        value = re.sub(pattern, repl, value)
    return value


def fields_of(src: str) -> dict[str, str]:
    out: dict[str, str] = {}
    constants: dict[str, str] = {}
    for stmt in class_statements(src):
        decl, eq, init = stmt.partition("=")
        words = re.sub(r"@\w+(\([^)]*\))?", " ", decl).split()
        if len(words) < 2 or "(" in decl:
            continue
        static = "static" in words
        words = [w for w in words if w not in _MODIFIERS and w != "static"]
        if len(words) < 2 or not re.fullmatch(r"\w+", words[-1]):
            continue
        type_name = re.sub(r"<.*", "", " ".join(words[:-1]))
        value = reduce_value(type_name, init if eq else None)
        if static:
            constants[words[-1]] = value  # a constant another initialiser may name
        else:
            out[words[-1]] = value
    return {k: _normalise(v, constants) for k, v in out.items()}


def extract(sources: dict[str, Source]) -> dict[str, Any]:
    """``{"refs": {label: where it was read, "files": {class: path}}, "classes": {class: {label: fields}}}``;
    a jar label also lists the classes its jars do not hold (``unknown_classes``)."""
    result: dict[str, Any] = {"refs": {}, "classes": {}}
    for label, source in sources.items():
        info = source.describe()
        files = source.class_files()
        info["files"] = dict(sorted(files.items()))
        if isinstance(source, JarSource):
            info["unknown_classes"] = [c for c in CLASSES if c not in files]
        result["refs"][label] = info
        for cls, path in sorted(files.items()):
            result["classes"].setdefault(cls, {})[label] = fields_of(source.read(path))
    return result


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        sys.stderr.write(__doc__ or "")
        return 2
    specs = dict(a.split("=", 1) for a in argv[1:]) if len(argv) > 1 else DEFAULT_SOURCES
    json.dump(extract({label: source_of(argv[0], spec) for label, spec in specs.items()}),
              sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
