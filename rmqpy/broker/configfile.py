"""The broker's config/*.json files, written as Java's ConfigManager writes them.

``persist`` writes ``<file>.tmp``, keeps the previous file as ``<file>.bak`` and renames
the new one into place; ``load`` falls back to ``.bak`` when the file is missing, empty
or unreadable. Content is fastjson pretty format (tabs, sorted keys, raw integer keys),
so a Java broker reads these files and we read its files.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from twisted.logger import Logger

from rmqpy.common.filewrite import write_file_atomically
from rmqpy.protocol import fastjson

log = Logger()


#: a config file written so that a crash leaves the old or the new one (rmqpy.common.filewrite)
write_config = write_file_atomically


def read_config(path: str) -> Any | None:
    """The parsed JSON of ``path`` (or of its ``.bak``); None if neither is usable."""
    for candidate in (path, path + ".bak"):
        try:
            with open(candidate, encoding="utf-8") as fh:
                text = fh.read()
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            log.error("cannot read {path}: {exc}", path=candidate, exc=exc)
            continue
        if not text.strip():
            continue
        try:
            return fastjson.loads(text)
        except ValueError as exc:
            log.error("{path} is not valid JSON ({exc}); trying the backup", path=candidate, exc=exc)
    return None


class ConfigManager:
    """Base of the managers that own one config file."""

    file_name = ""

    def __init__(self, config_dir: str | None) -> None:
        self.config_dir = config_dir

    @property
    def path(self) -> str | None:
        return os.path.join(self.config_dir, self.file_name) if self.config_dir else None

    def load(self) -> bool:
        if self.path is None:
            return True
        obj = read_config(self.path)
        if obj is not None:
            self.decode(obj)
        return True

    def persist(self) -> None:
        if self.path is None:
            return
        try:
            write_config(self.path, fastjson.dumps(self.encode(), pretty=True))
        except OSError as exc:
            log.error("persist {path} failed: {exc}", path=self.path, exc=exc)

    # subclasses
    def encode(self) -> Any:
        raise NotImplementedError

    def decode(self, obj: Any) -> None:
        raise NotImplementedError


Callback = Callable[[], None]
