"""Apache rocketmq-dashboard for tests/interop/test_dashboard.py: find its jar, or build one, and talk to it.

The dashboard is not on Maven Central, so a clean clone has no way to get it: the jar comes from
``RMQPY_DASHBOARD_JAR``, or is built with Maven (its frontend skipped: only the REST API it serves to
its pages) from the source tree ``RMQPY_DASHBOARD_SRC`` names, a checkout or a bare git directory of
the project (its newest ``rocketmq-dashboard-*`` tag that builds). A built jar is kept in the
machine-wide cache the other interop builds use (tests/interop/build_cache.sh), keyed by the hash of
its sources, so Maven runs once per source. :func:`locate` answers a jar or the reason there is none.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ENV_JAR = "RMQPY_DASHBOARD_JAR"
ENV_SRC = "RMQPY_DASHBOARD_SRC"
TAG_PREFIX = "rocketmq-dashboard-"
#: Maven's switches: no tests, and none of the frontend (Node and npm download a toolchain of their own,
#: which this machine cannot), its copy step, or the release checks (style, licence headers, coverage)
MVN_ARGS = ["-B", "-q", "-Dstyle.color=never", "-DskipTests", "-Dmaven.test.skip=true",
            "-Dskip.installnodenpm", "-Dskip.npm", "-Dmaven.antrun.skip=true", "-Drat.skip=true",
            "-Djacoco.skip=true", "-Dcheckstyle.skip=true", "package"]
#: what a frontend-less build reads of the source tree
PARTS = ("pom.xml", "src")
#: a built jar in the cache is found by this name, under the cache's dashboard/ directory
BUILT_NAME = "rocketmq-dashboard-{key}.jar"


class Unavailable(Exception):
    """No dashboard jar here: the message is the skip reason."""


def cache_dir(env: dict[str, str] | os._Environ[str] = os.environ) -> Path | None:
    """The cache build_cache.sh would choose (None for ``RMQPY_BUILD_CACHE=off``)."""
    chosen = env.get("RMQPY_BUILD_CACHE", "")
    if chosen == "off":
        return None
    if not chosen:
        system = Path("/var/cache/rmqpy-interop")
        try:
            system.mkdir(parents=True, exist_ok=True)
            if os.access(system, os.W_OK):
                return system / "dashboard"
        except OSError:
            pass
        chosen = str(Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rmqpy-interop")
    return Path(chosen) / "dashboard"


def _git(src: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(src), *args], check=True, capture_output=True, text=True,
                          timeout=120).stdout.strip()


def _sources_key(tree: Path) -> str:
    """A hash of the names and contents of pom.xml and src/main/ (what a frontend-less build reads)."""
    h = hashlib.sha256()
    files = [tree / "pom.xml", *sorted(p for p in (tree / "src" / "main").rglob("*") if p.is_file())]
    for f in files:
        h.update(str(f.relative_to(tree)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:24]


def candidates(src: Path) -> list[tuple[str, str]]:
    """(label, key) of what can be built from ``src``: the checkout itself, or a bare git directory's
    two newest release tags, newest first (the second is tried once when the first does not build)."""
    if (src / "pom.xml").is_file():
        return [(str(src), _sources_key(src))]
    try:
        tags = _git(src, "tag", "-l", TAG_PREFIX + "*", "--sort=-v:refname").split()
        return [(tag, _git(src, "rev-parse", f"{tag}^{{tree}}")[:24]) for tag in tags[:2]]
    except (OSError, subprocess.SubprocessError):
        return []


def _unpack(src: Path, label: str, into: Path) -> None:
    if label == str(src):
        shutil.copy2(src / "pom.xml", into / "pom.xml")
        shutil.copytree(src / "src", into / "src")
        return
    archive = subprocess.run(["git", "-C", str(src), "archive", label, *PARTS], check=True,
                             capture_output=True, timeout=300).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True, timeout=300)


def build(src: Path, cache: Path | None, log: list[str]) -> Path:
    """The jar built from ``src`` (from the cache when it holds one for the same sources)."""
    if shutil.which("mvn") is None or shutil.which("java") is None:
        raise Unavailable(f"{ENV_SRC} is set but mvn or java is missing: cannot build rocketmq-dashboard")
    found = candidates(src)
    if not found:
        raise Unavailable(f"{ENV_SRC}={src} is neither a checkout (pom.xml) nor a git directory with "
                          f"{TAG_PREFIX}* tags")
    where = cache or Path(tempfile.gettempdir()) / f"rmqpy-dashboard-{os.getuid()}"
    where.mkdir(parents=True, exist_ok=True)
    with open(where / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one Maven build per cache (pytest workers may all ask)
        for label, key in found:
            jar = where / BUILT_NAME.format(key=key)
            if jar.is_file():
                return jar
            with tempfile.TemporaryDirectory(prefix="dashboard-build-") as tmp:
                _unpack(src, label, Path(tmp))
                mvn = ["mvn", *MVN_ARGS]
                if os.environ.get("MAVEN_REPO_LOCAL"):
                    mvn.insert(1, f"-Dmaven.repo.local={os.environ['MAVEN_REPO_LOCAL']}")
                run = subprocess.run(mvn, cwd=tmp, capture_output=True, text=True, timeout=1500)
                built = sorted(Path(tmp, "target").glob("rocketmq-dashboard-*.jar"))
                if run.returncode != 0 or not built:
                    errors = [x for x in (run.stdout + run.stderr).splitlines() if x.startswith("[ERROR] ") and x[8:].strip()]
                    log.append(f"{label}: mvn exited {run.returncode}: {(errors or ['no [ERROR] line'])[0][:400]}")
                    continue
                part = jar.with_suffix(f".tmp{os.getpid()}")
                shutil.copyfile(built[0], part)
                part.replace(jar)
                return jar
    raise Unavailable("rocketmq-dashboard did not build from " + f"{src}: " + " | ".join(log))


def locate(env: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """The dashboard jar to run, or :class:`Unavailable` with the reason (the test's skip message)."""
    if env.get(ENV_JAR):
        jar = Path(env[ENV_JAR])
        if not jar.is_file():
            raise Unavailable(f"{ENV_JAR}={jar} is not a file")
        return jar
    if env.get(ENV_SRC):
        return build(Path(env[ENV_SRC]), cache_dir(env), [])
    raise Unavailable(f"rocketmq-dashboard is not on Maven Central: set {ENV_JAR} to its jar or {ENV_SRC} "
                      "to its source (docs/dashboard.md)")


def command(jar: Path, port: int, namesrv_addr: str, data: Path) -> list[str]:
    """``java -jar`` the dashboard on ``port`` for the name server ``namesrv_addr``, its files under ``data``
    (its logs go to ``${user.home}/logs``), with no background collection: only what is asked is run."""
    return ["java", "-Xms128m", "-Xmx384m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
            f"-Duser.home={data}", "-jar", str(jar), f"--server.port={port}",
            f"--rocketmq.config.namesrvAddrs={namesrv_addr}", f"--rocketmq.config.dataPath={data / 'data'}",
            "--rocketmq.config.enableDashBoardCollect=false"]


class Rest:
    """The dashboard's JSON endpoints as its pages call them; :meth:`get`/:meth:`post` answer ``data`` of
    its ``{"status", "data", "errMsg"}`` envelope and fail on a non-zero status."""

    def __init__(self, base: str, timeout: float = 60) -> None:
        self.base, self.timeout = base, timeout

    def raw(self, method: str, path: str, body: object = None, **query: object) -> object:
        url = self.base + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if body is None else json.dumps(body).encode()
        headers = {} if body is None else {"Content-Type": "application/json"}
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            text = resp.read().decode()
        try:
            return json.loads(text)
        except ValueError:
            return text  # a few endpoints answer a bare string (rocketmq/nsaddr.query)

    def _data(self, answer: object, path: str) -> object:
        assert isinstance(answer, dict) and answer.get("status") == 0, f"{path}: {answer}"
        return answer["data"]

    def get(self, path: str, **query: object) -> object:
        return self._data(self.raw("GET", path, **query), path)

    def post(self, path: str, body: object = None, **query: object) -> object:
        return self._data(self.raw("POST", path, body, **query), path)

    def wait_ready(self, timeout: float, alive) -> None:
        """Until the cluster page answers (a Spring Boot start takes 10 s idle, over a minute on a busy
        machine); ``alive()`` false means the process is gone."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            if not alive():
                raise AssertionError(f"the dashboard exited before it answered: {last}")
            try:
                answer = self.raw("GET", "/cluster/list.query")
                if isinstance(answer, dict) and answer.get("status") == 0:
                    return
                last = answer
            except (OSError, urllib.error.URLError) as e:
                last = e
            time.sleep(0.5)
        raise AssertionError(f"the dashboard did not answer within {timeout}s: {last}")
