"""Which keys UPDATE_BROKER_CONFIG / UPDATE_NAMESRV_CONFIG may change.

Java refuses only its ``configBlackList`` (broker: brokerConfigPath, rocketmqHome,
configBlackList + BrokerConfig.configBlackList; name server: configBlackList,
configStorePath, kvConfigPath, rocketmqHome + NamesrvConfig.configBlackList) and answers
NO_PERMISSION "Can not update config in black list.". Anyone who reaches the port can
therefore move the store, turn TLS or ACL off for the next start, or change the ports.
We refuse those too unless the config file opts in with ``remoteConfigUpdateAllowKeys``
(";"-separated key names, or ``*`` for Java's behaviour), and refuse any key or value
holding a control character, which no legitimate setting needs.
"""
from __future__ import annotations

import re
from typing import Iterable

from rmqpy.common.properties import PropertiesError, parse_properties

#: the config-file setting that lets remote updates change protected keys
ALLOW_KEYS_SETTING = "remoteConfigUpdateAllowKeys"

#: AdminBrokerProcessor.initConfigBlackList (5.x), always refused
BROKER_BLACK_LIST = ("brokerConfigPath", "rocketmqHome", "configBlackList")
#: DefaultRequestProcessor.initConfigBlackList of the name server (5.x), always refused
NAMESRV_BLACK_LIST = ("configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome")

JAVA_REMARK = "Can not update config in black list."

#: a whole broker config is about 10 KiB; parsing runs on the reactor thread, so a 16 MiB body
#: of 280,000 keys (about a second of it) is refused unread
MAX_BODY_BYTES = 128 * 1024

# camel-case words of a key that make it protected, by kind
_KINDS: tuple[tuple[str, frozenset[str]], ...] = (
    ("path", frozenset({"path", "paths", "dir", "dirs", "directory", "home"})),
    ("TLS", frozenset({"tls", "ssl"})),
    ("ACL", frozenset({"acl", "auth", "authentication", "authorization", "credential", "credentials",
                       "secret", "password"})),
    ("address", frozenset({"port", "host", "ip", "bind", "addr", "address", "addresses", "addrs"})),
)
_WORD = re.compile(r"[A-Z]+\d*(?![a-z])|[A-Z]?[a-z]+\d*|\d+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


def _words(key: str) -> set[str]:
    """``brokerIP1`` -> {broker, ip}; ``storePathRootDir`` -> {store, path, root, dir}."""
    return {w.lower().rstrip("0123456789") for w in _WORD.findall(key)}


def protected_kind(key: str) -> str | None:
    """"path", "TLS", "ACL" or "address" when remote updates of ``key`` are refused by default."""
    if key.lower().startswith(("tls", "ssl")):
        return "TLS"
    words = _words(key)
    for kind, names in _KINDS:
        if words & names:
            return kind
    return None


def has_control(text: str) -> bool:
    """A C0 control, DEL or a lone surrogate (a ``\\uD800`` escape makes one)."""
    return _CONTROL.search(text) is not None


def parse_update_body(body: bytes) -> dict[str, str]:
    """The properties of an UPDATE_*_CONFIG body (UTF-8, as Java's ``MixAll.string2Properties``)."""
    if len(body) > MAX_BODY_BYTES:
        raise PropertiesError(f"body of {len(body)} bytes, more than {MAX_BODY_BYTES}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PropertiesError(f"body is not UTF-8: {exc.reason}") from None
    return parse_properties(text, "body")


def refusal(props: dict[str, str], java_black_list: Iterable[str], allow_keys: str) -> str | None:
    """The remark to answer with NO_PERMISSION, or None when every key may be updated.

    ``java_black_list`` is refused whatever ``allow_keys`` says (as in Java); so is the
    allow setting itself, which only the config file may set.
    """
    black = {k for k in java_black_list if k} | {ALLOW_KEYS_SETTING}
    if black & props.keys():
        return JAVA_REMARK
    bad = [k for k, v in props.items() if has_control(k) or has_control(v)]
    if bad:
        return f"{JAVA_REMARK} Control characters in {_names(bad)}."
    allowed = {k.strip() for k in allow_keys.split(";") if k.strip()}
    if "*" in allowed:
        return None
    protected = [(k, kind) for k in props if k not in allowed and (kind := protected_kind(k))]
    if not protected:
        return None
    kinds = sorted({kind for _, kind in protected})
    return (f"{JAVA_REMARK} {_names([k for k, _ in protected])}: {', '.join(kinds)} keys need "
            f"{ALLOW_KEYS_SETTING} in the config file.")


def _names(keys: list[str], limit: int = 5) -> str:
    """At most ``limit`` keys, printable, for a remark or a log line."""
    shown = ", ".join(ascii(k)[1:-1][:64] for k in keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")
