"""Plain ACL rules: the YAML files of Java's ``PlainPermissionManager`` and the checks it makes.

Files: ``$ROCKETMQ_HOME/conf/plain_acl.yml`` (``rocketmq.acl.plain.file``, relative to the home,
is another name for it) and every ``*.yml``/``*.yaml`` under ``$ROCKETMQ_HOME/conf/acl/``.
Each holds ``globalWhiteRemoteAddresses`` (a list of address patterns), ``accounts`` (each with
``accessKey``, ``secretKey``, ``whiteRemoteAddress``, ``admin``, ``defaultTopicPerm``,
``defaultGroupPerm``, ``topicPerms``, ``groupPerms``) and ``dataVersion``. An access key
defined in two files counts in the first only, as in Java.

:func:`load_rules` turns the files into an immutable :class:`PlainAclRules`; any error in
any file (bad YAML, a short key, a bad address pattern or permission) raises, so the caller
keeps its previous rules: a broken edit never opens or closes the broker by accident.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable

import yaml

from rmqpy.acl import address
from rmqpy.acl.permission import (
    ACCESS_KEY_MIN_LENGTH,
    SECRET_KEY_MIN_LENGTH,
    AclError,
    check_resource_perms,
    parse,
    retry_topic,
)

DEFAULT_PLAIN_FILE = "conf/plain_acl.yml"
ACL_DIR = "conf/acl"
TOOLS_FILE = "conf/tools.yml"
MAX_FILE_BYTES = 16 * 1024 * 1024  # rmqpy: a bound on what one ACL file may make the broker parse


@dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str
    white_remote_address: str | None
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: dict[str, int]  # topics by name, groups by their retry topic
    file: str
    white: address.Matcher = field(repr=False, compare=False, default=address._never)


@dataclass(frozen=True)
class PlainAclRules:
    files: tuple[str, ...] = ()
    global_white: tuple[address.Matcher, ...] = ()
    accounts: dict[str, Account] = field(default_factory=dict)
    data: dict[str, dict[str, Any]] = field(default_factory=dict)  # each file's parsed YAML

    def data_version(self, path: str) -> dict[str, int]:
        """A file's ``dataVersion`` (``{counter, timestamp}``; zeros when the file has none)."""
        versions = (self.data.get(path) or {}).get("dataVersion")
        first = versions[0] if isinstance(versions, list) and versions and isinstance(versions[0], dict) else {}
        return {"counter": _int(first.get("counter")), "timestamp": _int(first.get("timestamp"))}


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True)
class AclPaths:
    """Where the plain ACL files of one broker live."""

    home: str | None
    plain_file_name: str = DEFAULT_PLAIN_FILE

    @property
    def default_file(self) -> str | None:
        if not self.home:
            return None
        return os.path.normpath(os.path.join(self.home, self.plain_file_name))

    @property
    def acl_dir(self) -> str | None:
        return os.path.join(self.home, ACL_DIR) if self.home else None

    def files(self) -> list[str]:
        """The ACL files now present: those under conf/acl (sorted), then the default file."""
        found: list[str] = []
        acl_dir = self.acl_dir
        if acl_dir and os.path.isdir(acl_dir):
            for root, dirs, names in os.walk(acl_dir):
                dirs.sort()
                for name in sorted(names):
                    if name.endswith((".yml", ".yaml")):
                        found.append(os.path.normpath(os.path.join(root, name)))
        default = self.default_file
        if default and os.path.isfile(default) and default not in found:
            found.append(default)
        return found

    def watched_dirs(self) -> list[str]:
        """Directories whose changes may change the rules."""
        dirs = []
        if self.default_file:
            dirs.append(os.path.dirname(self.default_file))
        if self.acl_dir and os.path.isdir(self.acl_dir):
            dirs.extend(root for root, _d, _n in os.walk(self.acl_dir))
        return sorted(set(dirs))


def read_yaml(text: bytes, path: str) -> dict[str, Any]:
    """One ACL file's content; an empty file is an empty mapping."""
    if len(text) > MAX_FILE_BYTES:
        raise AclError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AclError(f"{path}: not valid YAML: {exc}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise AclError(f"{path}: expected a YAML mapping at the top")
    return doc


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        raise AclError(f"expected a text value, got {type(value).__name__}")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _strings(value: Any, key: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise AclError(f"{key} must be a list")
    return [str(_text(v)) for v in value if v is not None]


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() == "true" if value is not None else False


def build_account(entry: Any, file: str) -> Account:
    """One ``accounts`` entry, checked as Java's ``buildPlainAccessResource`` checks it."""
    if not isinstance(entry, dict):
        raise AclError(f"{file}: an account must be a mapping")
    ak, sk = _text(entry.get("accessKey")), _text(entry.get("secretKey"))
    if ak is None or sk is None or len(ak) <= ACCESS_KEY_MIN_LENGTH or len(sk) <= SECRET_KEY_MIN_LENGTH:
        # never the secret in the message: it goes to the log
        raise AclError(f"{file}: account accessKey={ak}: accessKey and secretKey cannot be null and their "
                       f"length should be longer than {ACCESS_KEY_MIN_LENGTH}")
    topic_perms = _strings(entry.get("topicPerms"), "topicPerms")
    group_perms = _strings(entry.get("groupPerms"), "groupPerms")
    check_resource_perms(topic_perms)
    check_resource_perms(group_perms)
    perms: dict[str, int] = {}
    for item in group_perms or []:
        name, perm = [p for p in item.split("=") if p]
        perms[retry_topic(name.strip())] = parse(perm)
    for item in topic_perms or []:
        name, perm = [p for p in item.split("=") if p]
        perms[name.strip()] = parse(perm)
    white_text = _text(entry.get("whiteRemoteAddress"))
    try:
        white = address.matcher(white_text)
    except AclError as exc:
        raise AclError(f"{file}: account accessKey={ak}: {exc}") from None
    return Account(access_key=ak, secret_key=sk, white_remote_address=white_text, admin=_bool(entry.get("admin")),
                   default_topic_perm=parse(_text(entry.get("defaultTopicPerm"))),
                   default_group_perm=parse(_text(entry.get("defaultGroupPerm"))),
                   perms=perms, file=file, white=white)


def load_rules(files: Iterable[tuple[str, bytes]]) -> PlainAclRules:
    """Rules from ``(path, content)`` pairs; raises :class:`AclError` on the first error."""
    paths: list[str] = []
    white: list[address.Matcher] = []
    accounts: dict[str, Account] = {}
    data: dict[str, dict[str, Any]] = {}
    for path, text in files:
        doc = read_yaml(text, path)
        paths.append(path)
        data[path] = doc
        for pattern in _strings(doc.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses") or []:
            try:
                white.append(address.matcher(pattern))
            except AclError as exc:
                raise AclError(f"{path}: globalWhiteRemoteAddresses: {exc}") from None
        entries = doc.get("accounts")
        if entries is not None and not isinstance(entries, list):
            raise AclError(f"{path}: accounts must be a list")
        for entry in entries or []:
            account = build_account(entry, path)
            accounts.setdefault(account.access_key, account)  # the first file that names a key wins
    return PlainAclRules(tuple(paths), tuple(white), accounts, data)


def read_files(paths: Iterable[str]) -> list[tuple[str, bytes]]:
    out = []
    for path in paths:
        with open(path, "rb") as fh:
            out.append((path, fh.read(MAX_FILE_BYTES + 1)))
    return out
