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

from twisted.logger import Logger

from rmqpy.acl.permission import AclError
from rmqpy.acl.plain import AclPaths, PlainAclRules, load_rules, read_files
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
