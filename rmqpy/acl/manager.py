"""The broker's plain ACL: its files, the rules in force, and their reload (Java's ``PlainPermissionManager``).

:meth:`PlainPermissionManager.load` reads every ACL file and builds new rules; they replace
the rules in force only when every file is valid, so a broken edit keeps the last good rules
(and logs one error per broken state). At start-up a broken file is an error: the broker does
not start with rules nobody wrote.

:meth:`watch` reloads on change with the TLS files' mechanism (:mod:`rmqpy.remoting.filewatch`:
inotify on the ACL directories plus a 500 ms poll, a change told by content). Java polls every
5 s and reloads a changed file alone; rmqpy rebuilds the rules from all files at once, so a
key moved from one file to another never counts twice or not at all for a moment.
"""
from __future__ import annotations

import os
from typing import Any

import yaml
from twisted.logger import Logger

from rmqpy.acl.permission import ACCESS_KEY_MIN_LENGTH, SECRET_KEY_MIN_LENGTH, AclError, check_resource_perms
from rmqpy.acl.plain import MAX_FILE_BYTES, AclPaths, PlainAclRules, load_rules, read_files, read_yaml
from rmqpy.remoting.filewatch import FileWatcher, digest


class PlainPermissionManager:
    log = Logger(namespace="rmqpy.acl")

    def __init__(self, paths: AclPaths) -> None:
        if not paths.home:
            raise AclError("aclEnable=true needs rocketmqHome (or ROCKETMQ_HOME): the ACL files are "
                           f"$ROCKETMQ_HOME/{paths.plain_file_name} and $ROCKETMQ_HOME/conf/acl/*.yml")
        self.paths = paths
        self.rules = PlainAclRules()
        self.reloads = 0
        self.failures = 0
        self._failed_state: Any = None
        self._seen: dict[str, str] = {}  # content hashes of the files last looked at
        self._watcher: FileWatcher | None = None

    def current(self) -> PlainAclRules:
        return self.rules

    def start(self) -> None:
        """First load (raises on any error), creating the default file empty when missing, as Java does."""
        default = self.paths.default_file
        assert default is not None
        if not os.path.exists(default):
            os.makedirs(os.path.dirname(default), exist_ok=True)
            with open(default, "a", encoding="utf-8"):
                pass
            self.log.warn("ACL: created the empty {path}: every request is refused until it names accounts "
                          "or white addresses", path=default)
        files = read_files(self.paths.files())
        self.rules = self._build(files)
        self._seen = digest(dict(files))
        self._log_loaded("loaded")

    def watch(self, clock: Any, reactor: Any = None, use_inotify: bool | None = None) -> None:
        """Reload whenever an ACL file is added, removed or changed."""
        if self._watcher is None:
            self._watcher = FileWatcher("ACL", self.check, self.paths.watched_dirs, clock, reactor, use_inotify)
            self._watcher.start()

    def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None

    def check(self) -> bool:
        """Reload when the files' contents differ from the last look; True when new rules are in force."""
        try:
            files = read_files(self.paths.files())
        except OSError:
            return False  # being replaced: look again at the next poll or event
        seen = digest(dict(files))
        if seen == self._seen:
            return False
        self._seen = seen
        return self.reload(files)

    def _build(self, files: list[tuple[str, bytes]]) -> PlainAclRules:
        return load_rules(files)

    def reload(self, files: list[tuple[str, bytes]] | None = None) -> bool:
        """Re-read the files; True when the new rules are in force. Errors keep the rules in force."""
        try:
            if files is None:
                files = read_files(self.paths.files())
            rules = self._build(files)
        except (AclError, OSError) as exc:
            state = sorted((p, hash(b)) for p, b in files or [])
            if state != self._failed_state:  # one error per broken state
                self._failed_state = state
                self.failures += 1
                self.log.error("ACL: reload failed, keeping the previous rules ({n} accounts): {err}",
                               n=len(self.rules.accounts), err=exc)
            return False
        self._failed_state = None
        self.rules = rules
        self.reloads += 1
        self._log_loaded("reloaded")
        return True

    def _log_loaded(self, what: str) -> None:
        rules = self.rules
        self.log.info("ACL: {what} {files}: {n} accounts, {w} global white address patterns", what=what,
                      files=", ".join(rules.files) or "(no files)", n=len(rules.accounts), w=len(rules.global_white))

    # ------------------------------------------------------------------ mqadmin's plain ACL codes
    def _files(self) -> dict[str, bytes]:
        return dict(read_files(self.paths.files()))

    def _write(self, path: str, doc: dict[str, Any], now_ms: int) -> None:
        """Write one ACL file with its dataVersion moved on, after checking the whole new rule set."""
        versions = doc.get("dataVersion")
        first = versions[0] if isinstance(versions, list) and versions and isinstance(versions[0], dict) else {}
        doc["dataVersion"] = [{"counter": _as_int(first.get("counter")) + 1, "timestamp": now_ms}]
        text = yaml.safe_dump(doc, default_flow_style=False, sort_keys=False, allow_unicode=True).encode("utf-8")
        files = self._files()
        files[path] = text
        rules = self._build(list(files.items()))  # raises: nothing is written
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "wb") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        self.rules = rules
        self._seen = digest(files)
        self._log_loaded("updated")

    def _doc(self, path: str) -> dict[str, Any]:
        with open(path, "rb") as fh:
            return read_yaml(fh.read(MAX_FILE_BYTES + 1), path)

    def update_access_config(self, config: dict[str, Any], now_ms: int) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG: change the account in its file, or add it to the default file."""
        ak, sk = config.get("accessKey"), config.get("secretKey")
        if not ak or not sk or len(ak) <= ACCESS_KEY_MIN_LENGTH or len(sk) <= SECRET_KEY_MIN_LENGTH:
            raise AclError(f"The accessKey={ak} and secretKey cannot be null and length should longer than 6")
        check_resource_perms(config.get("topicPerms"))
        check_resource_perms(config.get("groupPerms"))
        account = self.rules.accounts.get(ak)
        path = account.file if account is not None else self.paths.default_file
        assert path is not None
        doc = self._doc(path)
        accounts = doc.get("accounts")
        if not isinstance(accounts, list):
            accounts = []
        old = next((a for a in accounts if isinstance(a, dict) and str(a.get("accessKey")) == ak), None)
        entry: dict[str, Any] = dict(old) if old is not None else {}
        if old is not None:
            accounts.remove(old)
        entry["accessKey"] = ak
        entry["secretKey"] = sk
        if config.get("whiteRemoteAddress") is not None:
            entry["whiteRemoteAddress"] = config["whiteRemoteAddress"]
        entry["admin"] = bool(config.get("admin"))
        for key in ("defaultTopicPerm", "defaultGroupPerm"):
            if config.get(key):
                entry[key] = config[key]
        for key in ("topicPerms", "groupPerms"):
            if config.get(key) is not None:
                entry[key] = list(config[key])
        accounts.append(entry)
        doc["accounts"] = accounts
        self._write(path, doc, now_ms)

    def delete_access_config(self, access_key: str, now_ms: int) -> bool:
        """DELETE_ACL_CONFIG: False when no file defines the key."""
        account = self.rules.accounts.get(access_key)
        if account is None:
            return False
        doc = self._doc(account.file)
        accounts = [a for a in doc.get("accounts") or []
                    if not (isinstance(a, dict) and str(a.get("accessKey")) == access_key)]
        doc["accounts"] = accounts
        self._write(account.file, doc, now_ms)
        return True

    def update_global_white_addrs(self, addrs: list[str], path: str | None, now_ms: int) -> bool:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: only an ACL file already in use (or the default file) is written,
        whatever path the request names (Java checks the path lies under ROCKETMQ_HOME)."""
        target = os.path.normpath(path) if path else self.paths.default_file
        if target not in self.paths.files():
            return False
        doc = self._doc(target)
        doc["globalWhiteRemoteAddresses"] = list(addrs)
        self._write(target, doc, now_ms)
        return True

    def all_acl_config(self) -> tuple[list[str], list[dict[str, Any]]]:
        """GET_BROKER_CLUSTER_ACL_CONFIG: every file's global white addresses and accounts (first definition of a key)."""
        white: list[str] = []
        accounts: list[dict[str, Any]] = []
        seen: set[str] = set()
        for path in self.rules.files:
            doc = self.rules.data.get(path) or {}
            white.extend(str(a) for a in doc.get("globalWhiteRemoteAddresses") or [])
            for entry in doc.get("accounts") or []:
                if not isinstance(entry, dict) or str(entry.get("accessKey")) in seen:
                    continue
                seen.add(str(entry.get("accessKey")))
                accounts.append({
                    "accessKey": _opt_str(entry.get("accessKey")), "secretKey": _opt_str(entry.get("secretKey")),
                    "whiteRemoteAddress": _opt_str(entry.get("whiteRemoteAddress")),
                    "admin": bool(entry.get("admin")) if not isinstance(entry.get("admin"), str)
                    else entry["admin"].lower() == "true",
                    "defaultTopicPerm": _opt_str(entry.get("defaultTopicPerm")),
                    "defaultGroupPerm": _opt_str(entry.get("defaultGroupPerm")),
                    "topicPerms": [str(t) for t in entry.get("topicPerms") or []],
                    "groupPerms": [str(g) for g in entry.get("groupPerms") or []]})
        return white, accounts

    def versions(self) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
        """GET_BROKER_CLUSTER_ACL_INFO: the default file's dataVersion and every file's."""
        default = self.paths.default_file or ""
        per_file = {p: self.rules.data_version(p) for p in self.rules.files}
        return per_file.get(default, {"counter": 0, "timestamp": 0}), per_file


def _as_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)
