"""docs/configuration.md: every config key of both servers, generated from the config classes.

``python -m rmqpy.tools.config_table > docs/configuration.md``; tests/unit/test_docs.py fails
when the committed file differs. Columns: the key, the Java 5.3.3 default (captured from
``BrokerStartup -p`` / ``NamesrvStartup -p`` into ``java_defaults/``), rmqpy's default (the
dataclass field of ``rmqpy/broker/config.py``, ``rmqpy/namesrv/config.py`` or
``rmqpy/store/config.py``), and what rmqpy does with it:

* **used**: rmqpy code reads the setting (a ``.key`` attribute access somewhere in ``rmqpy/``);
* **accepted**: the key is read from the file / ``-D`` and printed by ``-p``, but nothing acts on it;
* **Java only**: no rmqpy setting; the file's value is reported as unknown and ignored.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from rmqpy.common.properties import parse_properties

PACKAGE = Path(__file__).resolve().parents[1]
JAVA_DEFAULTS = Path(__file__).resolve().parent / "java_defaults"
JAVA_VERSION = "5.3.3"
#: tools/java_config_defaults.py's extract of the config classes' field initialisers at each release
INITIALISERS = JAVA_DEFAULTS / "initialisers.json"
#: the releases the "across releases" table compares, oldest first: 4.9.7 and 5.3.3 read from their git
#: tags, 5.5.1 (newer than the stored apache/rocketmq snapshot) from its released sources jars
RELEASES = ("4.9.7", "5.3.3", "5.5.1")
#: why a release's class was not read (initialisers.json lists such classes under ``unknown_classes``)
UNREAD_WHY = "rocketmq-proxy 5.5.1 is not in the Maven repository the extract was run against"
#: which Java config classes make up each server's keys (Java's BrokerStartup/NamesrvStartup/ProxyStartup)
SERVER_CLASSES = {
    "broker": ("BrokerConfig", "BrokerIdentity", "MessageStoreConfig", "NettyServerConfig", "NettyClientConfig"),
    "namesrv": ("NamesrvConfig", "NettyServerConfig", "NettyClientConfig"),
    "gRPC (ProxyConfig)": ("ProxyConfig",),
}

#: rmqpy defaults that are not Java 5.3.3's, each with its reason; tests/unit/test_config_defaults.py
#: fails for any other difference and for a reason whose key no longer differs
EXCEPTIONS: dict[str, str] = {}
#: what a row of the across-releases table needs said beside its values
NOTES: dict[str, str] = {
    "listenPort": "class defaults only (5.x BrokerConfig has its own, 6888): BrokerStartup sets 10911 and "
                  "NamesrvStartup 9876 in every release",
    "useTLS": "5.x reads the tls.enable system property (false unless set, or tls.server.mode=enforcing)",
    "transactionMetricFlushInterval": "how often Java writes its half-message counts to config/transactionMetrics; "
                                      "rmqpy counts them in memory only (rocketmq_half_messages) and writes no such file",
    "autoDeleteUnusedStats": "Java's stats bookkeeping; rmqpy's stats keep no per-key timers to delete",
    "transactionCheckInterval": "4.9.7's 60 s checked a transaction left UNKNOW too late for the Spring "
                                "starter's test (issue 33)",
}

#: the release rmqpy will report next (issue 33), whose changes from JAVA_VERSION are listed one by one
NEXT_VERSION = "5.5.1"
#: every key whose default changed between JAVA_VERSION and NEXT_VERSION (or that NEXT_VERSION dropped):
#: the release whose default rmqpy keeps, and why. rmqpy keeps JAVA_VERSION's unless the change is a plain
#: fix. For a key rmqpy has a setting for, its default is that release's; for one it has none for, the
#: value GET_BROKER_CONFIG prints to 5.x clients (rmqpy/broker/java_config.py) is.
#: tests/unit/test_config_defaults.py fails for a change without an entry, an entry without a change,
#: and a default that is not the named release's.
FROM_JAVA_TO_NEXT: dict[str, tuple[str, str]] = {
    "transactionMetricFlushInterval": (
        "5.3.3", "not a fix rmqpy needs: 5.5.1 writes the file less often because each write now also flushes the "
                 "backup file before replacing the original (apache/rocketmq #9412); rmqpy writes no such file. "
                 "mqadmin getBrokerConfig shows 3000, 5.3.3's, while rmqpy reports 5.3.3"),
}

#: defaults that depend on the host, the user or the environment, as the table prints them
_HOME = "/HOME"   # $HOME while the defaults are computed, printed as ~
_HOST_DEPENDENT = {
    "rocketmqHome": "$ROCKETMQ_HOME",
    "namesrvAddr": "$NAMESRV_ADDR",
    "brokerIP1": "(first non-loopback IPv4 address)",
    "brokerIP2": "(first non-loopback IPv4 address)",
    "brokerName": "(host name)",
    "grpcThreadPoolNums": "=16 + PROCESSOR_NUMBER * 2",  # Java's initialiser, which rmqpy's follows
}


def java_defaults(server: str) -> dict[str, str]:
    return parse_properties((JAVA_DEFAULTS / f"{server}-{JAVA_VERSION}.properties").read_text(), server)


@lru_cache(maxsize=1)
def _source() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(PACKAGE.rglob("*.py")))


def is_used(key: str) -> bool:
    """Whether rmqpy reads ``key``: an attribute access ``.key`` anywhere in the package (the
    field definitions themselves have no dot)."""
    return re.search(rf"\.{re.escape(key)}\b", _source()) is not None


def rmqpy_default(config: Any, f: dataclasses.Field) -> str:
    if f.name in _HOST_DEPENDENT:
        return _HOST_DEPENDENT[f.name]
    value = getattr(config, f.name)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if text == _HOME or text.startswith(_HOME + "/"):
        text = "~" + text[len(_HOME):]
    return text


def _cell(text: str) -> str:
    if text == "":
        return ""
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def _rows(configs: Iterable[Any], java: dict[str, str]) -> list[str]:
    ours: dict[str, tuple[str, str]] = {}
    for config in configs:
        for f in dataclasses.fields(config):
            ours.setdefault(f.name, (type(config).__name__, rmqpy_default(config, f)))
    rows = []
    for key in sorted(set(ours) | set(java), key=str.lower):
        java_value = _cell(java[key]) if key in java else "(none)"
        if key in ours:
            cls, value = ours[key]
            status = "used" if is_used(key) else "accepted"
            rows.append(f"| `{key}` | {java_value} | {_cell(value)} | {status} ({cls}) |")
        else:
            rows.append(f"| `{key}` | {java_value} |  | Java only |")
    return rows


def initialisers() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(INITIALISERS.read_text())
    return data


def unread_classes(release: str) -> list[str]:
    """The config classes a release's sources did not include (its sources jars lacked them): their keys
    are unknown in that release, not absent. A git ref's tree is whole, so it has none."""
    unknown: list[str] = initialisers()["refs"][release].get("unknown_classes", [])
    return unknown


def is_read(server: str, release: str) -> bool:
    """Whether every config class of ``server`` was read for ``release``."""
    return not set(SERVER_CLASSES[server]) & set(unread_classes(release))


def release_defaults(server: str) -> dict[str, dict[str, str]]:
    """``{release: {key: default}}`` of one server's config classes (the first class having a key wins)."""
    classes = initialisers()["classes"]
    out: dict[str, dict[str, str]] = {}
    for release in RELEASES:
        merged: dict[str, str] = {}
        for cls in SERVER_CLASSES[server]:
            for key, value in classes.get(cls, {}).get(release, {}).items():
                merged.setdefault(key, value)
        out[release] = merged
    return out


def differing_defaults(server: str) -> dict[str, list[str | None]]:
    """The keys whose default differs between releases that have them: ``{key: [value or None, ...]}``."""
    per = release_defaults(server)
    out: dict[str, list[str | None]] = {}
    for key in sorted(set().union(*per.values()), key=str.lower):
        values = [per[r].get(key) for r in RELEASES]
        present = {v for v in values if v is not None}
        if len([v for v in values if v is not None]) >= 2 and len(present) > 1:
            out[key] = values
    return out


def _server_of(key: str, release: str) -> tuple[str, str] | None:
    """(server, class) of a key in a release: the first server and class having it."""
    classes = initialisers()["classes"]
    for server, names in SERVER_CLASSES.items():
        for cls in names:
            if key in classes.get(cls, {}).get(release, {}):
                return server, cls
    return None


def changed_to_next() -> dict[str, tuple[str, str | None, str | None]]:
    """Keys whose default differs between JAVA_VERSION and NEXT_VERSION, or that NEXT_VERSION dropped,
    in the servers whose classes both releases read: ``{key: (server, old, new or None)}``."""
    out: dict[str, tuple[str, str | None, str | None]] = {}
    for server in SERVER_CLASSES:
        if not (is_read(server, JAVA_VERSION) and is_read(server, NEXT_VERSION)):
            continue
        per = release_defaults(server)
        old, new = per[JAVA_VERSION], per[NEXT_VERSION]
        for key in sorted(old, key=str.lower):
            if old[key] != new.get(key) and key not in out:
                out[key] = (server, old[key], new.get(key))
    return out


def new_in_next() -> dict[str, tuple[str, str, str]]:
    """Keys NEXT_VERSION has and JAVA_VERSION has not: ``{key: (server, class, default)}``."""
    out: dict[str, tuple[str, str, str]] = {}
    for server in SERVER_CLASSES:
        per = release_defaults(server)
        for key in sorted(set(per[NEXT_VERSION]) - set(per[JAVA_VERSION]), key=str.lower):
            where = _server_of(key, NEXT_VERSION)
            if key not in out and where is not None:
                out[key] = (server, where[1], per[NEXT_VERSION][key])
    return dict(sorted(out.items(), key=lambda kv: kv[0].lower()))


def _next_section(ours_by_server: dict[str, dict[str, str]]) -> list[str]:
    changed, new = changed_to_next(), new_in_next()
    unread = [s for s in SERVER_CLASSES if not is_read(s, NEXT_VERSION)]
    dropped = sum(1 for _, _, value in changed.values() if value is None)
    lines = [
        f"### From {JAVA_VERSION} to {NEXT_VERSION}\n",
        f"The keys whose default changed between {JAVA_VERSION} and {NEXT_VERSION} ({len(changed) - dropped}) "
        f"or that {NEXT_VERSION} dropped ({dropped}), with what rmqpy does. rmqpy reports {JAVA_VERSION} and keeps "
        f"{JAVA_VERSION}'s default unless {NEXT_VERSION}'s change is a plain fix"
        + (f"; not compared: {', '.join(unread)} ({NEXT_VERSION}'s class not read)" if unread else "") + ".\n",
        f"| key | server | {JAVA_VERSION} | {NEXT_VERSION} | rmqpy | keeps | what rmqpy does |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    if not changed:
        lines.append("| (none) | | | | | | |")
    for key, (server, old, value) in changed.items():
        ours = ours_by_server["namesrv" if server == "namesrv" else "broker"]
        keeps, why = FROM_JAVA_TO_NEXT.get(key, ("", ""))
        mine = _cell(ours[key]) if key in ours else "(no setting)"
        lines.append(f"| `{key}` | {server} | {_release_value(old)} | {_release_value(value)} | {mine} | {keeps} | {why} |")
    known = {**ours_by_server["namesrv"], **ours_by_server["broker"]}
    unknown = {k: v for k, v in new.items() if k not in known}
    lines += [
        "",
        f"### New in {NEXT_VERSION}, unknown to rmqpy\n",
        f"The keys {NEXT_VERSION}'s config classes have and {JAVA_VERSION}'s have not, for which rmqpy has no "
        f"setting ({len(unknown)}"
        + (f"; {len(new) - len(unknown)} more rmqpy has" if len(new) > len(unknown) else "")
        + "). rmqpy treats them as any key it does not know: a file's value is reported as an unknown key "
        "and ignored, a `-D` is an error, and `mqadmin getBrokerConfig` does not list them. A default in Java "
        "syntax is the initialiser as written (it names another class).\n",
        f"| key | server | class | {NEXT_VERSION} default |",
        "| --- | --- | --- | --- |",
    ]
    for key, (server, cls, value) in unknown.items():
        lines.append(f"| `{key}` | {server} | {cls} | {_release_value(value)} |")
    lines.append("")
    return lines


def _release_value(value: str | None, read: bool = True) -> str:
    if value is None:
        return "(none)" if read else "(not read)"
    return _cell(value[1:] if value.startswith("=") else value) or "(empty)"


def _describe_release(label: str, info: dict[str, Any]) -> str:
    """``4.9.7 = `rocketmq-all-4.9.7` (5eb2e4ca0e)`` for a git ref, the jars for released sources jars."""
    if "jars" in info:
        jars = ", ".join(f"`{name}`" for name in sorted(info["jars"]))
        return f"{label} = the released sources jars {jars} (Maven Central; sha1s in the JSON)"
    commit = f" {info['commit'][:10]}" if info["ref"] != info["commit"] else ""
    return f"{label} = `{info['ref']}` (apache/rocketmq git{commit})"


def _releases_section(ours_by_server: dict[str, dict[str, str]]) -> str:
    refs = initialisers()["refs"]
    lines = [
        "## Defaults across Java releases\n",
        "Every key whose field initialiser differs between the releases' config classes "
        f"({', '.join(sorted({c for cs in SERVER_CLASSES.values() for c in cs}))}), extracted by "
        "`tools/java_config_defaults.py` into `rmqpy/tools/java_defaults/initialisers.json`. The releases: "
        + "; ".join(_describe_release(label, refs[label]) for label in RELEASES)
        + ". `(none)`: no such key in that release; `(not read)`: the release's class was not read"
        + "".join(f" ({', '.join(unread_classes(r))} {r}: {UNREAD_WHY})" for r in RELEASES if unread_classes(r))
        + f". rmqpy reports itself as {JAVA_VERSION} and takes {JAVA_VERSION}'s default; an exception says why "
        "(tests/unit/test_config_defaults.py checks both).\n",
    ]
    for server in SERVER_CLASSES:
        lines.append(f"### {server}\n")
        lines.append("| key | " + " | ".join(RELEASES) + " | rmqpy | why |")
        lines.append("| --- | " + " | ".join("---" for _ in RELEASES) + " | --- | --- |")
        ours = ours_by_server["namesrv" if server == "namesrv" else "broker"]  # rmqpy's gRPC keys are the broker's
        rows = differing_defaults(server)
        per_release = release_defaults(server)
        if not rows:
            read = [r for r in RELEASES if is_read(server, r) and per_release[r]]
            lines.append(f"| (no key differs between the releases read: {', '.join(read)}) |" + " |" * (len(RELEASES) + 2))
        for key, values in rows.items():
            mine = _cell(ours[key]) if key in ours else "(no setting)"
            why = EXCEPTIONS.get(key) or NOTES.get(key, "")
            cells = [_release_value(v, is_read(server, r)) for v, r in zip(values, RELEASES)]
            lines.append(f"| `{key}` | " + " | ".join(cells) + f" | {mine} | {why} |")
        lines.append("")
    lines += _next_section(ours_by_server)
    lines.append("### rmqpy defaults that are not Java " + JAVA_VERSION + "'s\n")
    if not EXCEPTIONS:
        lines.append("None: every default rmqpy has is Java " + JAVA_VERSION + "'s.")
        return "\n".join(lines) + "\n"
    lines.append("| key | rmqpy | why |\n| --- | --- | --- |")
    everything = {**ours_by_server["namesrv"], **ours_by_server["broker"]}
    for key in sorted(EXCEPTIONS, key=str.lower):
        lines.append(f"| `{key}` | {_cell(everything.get(key, ''))} | {EXCEPTIONS[key]} |")
    return "\n".join(lines) + "\n"


def rmqpy_defaults() -> dict[str, dict[str, str]]:
    """rmqpy's default of every key, per server, as the tables print them (a pristine environment)."""
    saved = {k: os.environ.pop(k) for k in ("ROCKETMQ_HOME", "NAMESRV_ADDR", "HOME") if k in os.environ}
    os.environ["HOME"] = _HOME
    try:
        from rmqpy.broker.config import BrokerConfig, BrokerSettings
        from rmqpy.namesrv.config import NamesrvConfig, netty_server_config
        from rmqpy.store.config import MessageStoreConfig
        out: dict[str, dict[str, str]] = {}
        servers: list[tuple[str, list[Any]]] = [
            ("broker", [BrokerConfig(), BrokerSettings().netty, MessageStoreConfig()]),
            ("namesrv", [NamesrvConfig(), netty_server_config()])]
        for server, configs in servers:
            values: dict[str, str] = {}
            for config in configs:
                for f in dataclasses.fields(config):
                    values.setdefault(f.name, rmqpy_default(config, f))
            out[server] = values
        return out
    finally:
        del os.environ["HOME"]
        os.environ.update(saved)


def render() -> str:
    # the tables show the defaults of a pristine environment, whatever the caller's
    saved = {k: os.environ.pop(k) for k in ("ROCKETMQ_HOME", "NAMESRV_ADDR", "HOME") if k in os.environ}
    os.environ["HOME"] = _HOME
    try:
        from rmqpy.broker.config import BrokerConfig, BrokerSettings
        from rmqpy.namesrv.config import NamesrvConfig, netty_server_config
        from rmqpy.store.config import MessageStoreConfig
        broker = _rows([BrokerConfig(), BrokerSettings().netty, MessageStoreConfig()], java_defaults("broker"))
        namesrv = _rows([NamesrvConfig(), netty_server_config()], java_defaults("namesrv"))
    finally:
        del os.environ["HOME"]
        os.environ.update(saved)
    head = "| key | Java 5.3.3 default | rmqpy default | rmqpy |\n| --- | --- | --- | --- |\n"
    return (
        "# Configuration reference\n\n"
        "<!-- generated by `python -m rmqpy.tools.config_table > docs/configuration.md`; "
        "tests/unit/test_docs.py checks it -->\n\n"
        "Every key the broker (`twistd rmq-broker`, `mqbroker`) and the name server (`twistd rmq-namesrv`,\n"
        "`mqnamesrv`) take, in the `-c` file or as `-D key=value`, beside the Java default. Java defaults\n"
        f"are Apache RocketMQ {JAVA_VERSION}'s, as `BrokerStartup -p` / `NamesrvStartup -p` print them\n"
        "(`rmqpy/tools/java_defaults/`); `~` is the user's home; `(none)`: Java has no such key.\n\n"
        "The last column says what rmqpy does with the key: **used** (rmqpy acts on it), **accepted**\n"
        "(read, printed by `-p` and GET_BROKER_CONFIG, but nothing acts on it, usually a Java thread\n"
        "pool or Netty setting), **Java only** (no rmqpy setting: a file's value is reported as an\n"
        "unknown key and ignored, a `-D` is an error; `mqadmin getBrokerConfig` shows Java's default).\n"
        "The class is where rmqpy keeps it. \"used\" is found by the generator (a `.key` access in\n"
        "`rmqpy/`); a key rmqpy only prints reads as accepted.\n\n"
        "## Broker\n\n" + head + "\n".join(broker) + "\n\n"
        "## Name server\n\n" + head + "\n".join(namesrv) + "\n\n"
        + _releases_section(rmqpy_defaults())
    )


if __name__ == "__main__":
    import sys
    sys.stdout.write(render())
