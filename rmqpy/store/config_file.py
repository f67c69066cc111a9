"""config/*.json files (facts §7.1): safe load/persist and thin typed managers.

Files are fastjson text (pretty-printed, unquoted integer map keys such as
``{"offsetTable":{"T@G":{0:12}}}``).  Persist follows Java 4.9 ``MixAll.string2File``
(write ``.tmp``, copy the previous content to ``.bak``, rename) plus fsyncs; load
falls back to ``.bak`` when the file is missing, empty or corrupt.
"""

from __future__ import annotations

import logging
import os
from typing import Any

try:
    from rmqpy.protocol import fastjson as _json
except ImportError:  # pragma: no cover - fastjson is part of the package
    _json = None

log = logging.getLogger(__name__)


class ConfigFileError(Exception):
    """A config file (and its .bak) could not be read or parsed."""


def _loads(text: str) -> Any:
    return _json.loads(text)


def _dumps(obj: Any, pretty: bool = True) -> str:
    return _json.dumps(obj, pretty=pretty)


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_file(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


class ConfigFile:
    """One JSON config file with a ``.bak`` fallback."""

    def __init__(self, path: str):
        self.path = path
        self.loaded_from: str | None = None

    def read_text(self) -> str | None:
        """Text of the file or its .bak (None if neither exists / both empty)."""
        errors = []
        for p in (self.path, self.path + ".bak"):
            try:
                with open(p, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            except OSError as e:
                errors.append(f"{p}: {e}")
                continue
            if not data.strip():
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = data.decode("latin-1")  # Java 4.9 writes in the platform charset
            self.loaded_from = p
            return text
        if errors:
            raise ConfigFileError("; ".join(errors))
        return None

    def load(self) -> Any | None:
        """Parsed content, falling back to ``.bak`` if the main file is corrupt.

        Returns None if neither file exists.  Raises :class:`ConfigFileError` naming
        the path when no readable, parseable copy exists."""
        problems = []
        found = False
        for p in (self.path, self.path + ".bak"):
            try:
                with open(p, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            except OSError as e:
                found = True
                problems.append(f"{p}: cannot read: {e}")
                continue
            found = True
            if not data.strip():
                problems.append(f"{p}: empty")
                continue
            try:
                obj = _loads(data)
            except ValueError as e:
                problems.append(f"{p}: corrupt JSON: {e}")
                log.warning("config file %s is corrupt (%s); trying the backup", p, e)
                continue
            self.loaded_from = p
            if p != self.path:
                log.warning("config file %s unusable; loaded backup %s", self.path, p)
            return obj
        if not found:
            return None
        if all(x.endswith(": empty") for x in problems):
            return None
        raise ConfigFileError(f"cannot load config file {self.path}: " + "; ".join(problems))

    def persist(self, obj: Any, *, pretty: bool = True) -> None:
        text = obj if isinstance(obj, str) else _dumps(obj, pretty)
        self.persist_text(text)

    def persist_text(self, text: str) -> None:
        d = os.path.dirname(self.path)
        if d:
            os.makedirs(d, exist_ok=True)
        tmp = self.path + ".tmp"
        _write_file(tmp, text.encode("utf-8"))
        try:
            with open(self.path, "rb") as f:
                prev = f.read()
        except FileNotFoundError:
            prev = None
        if prev:
            _write_file(self.path + ".bak", prev)
        os.replace(tmp, self.path)
        _fsync_dir(d)


class _OffsetTableFile:
    """A config file of the shape ``{"offsetTable": {...}, ...}``: the table is typed by
    :meth:`_parse_table`, the other top-level keys are kept as they were read."""

    FILE = ""
    DROPPED_KEYS: tuple[str, ...] = ("offsetTable",)

    def __init__(self, config_dir: str, file_name: str | None = None):
        self.file = ConfigFile(os.path.join(config_dir, file_name or self.FILE))
        self.offset_table: dict = {}
        self.extra: dict = {}

    def _parse_table(self, table: dict) -> dict:
        raise NotImplementedError

    def load(self) -> bool:
        obj = self.file.load()
        if obj is None:
            return True
        if not isinstance(obj, dict):
            raise ConfigFileError(f"{self.file.path}: expected a JSON object")
        self.offset_table = self._parse_table(obj.get("offsetTable") or {})
        self.extra = {k: v for k, v in obj.items() if k not in self.DROPPED_KEYS}
        return True

    def to_json(self) -> dict:
        out = dict(self.extra)
        out["offsetTable"] = self.offset_table
        return out

    def persist(self) -> None:
        self.file.persist(self.to_json())


class ConsumerOffsetTable(_OffsetTableFile):
    """``config/consumerOffset.json``: ``{"offsetTable":{"topic@group":{queueId:offset}}}``."""

    FILE = "consumerOffset.json"
    DROPPED_KEYS = ("offsetTable", "groupTopicMap")  # groupTopicMap is never written back

    offset_table: dict[str, dict[int, int]]

    def _parse_table(self, table: dict) -> dict[str, dict[int, int]]:
        return {str(k): {int(q): int(o) for q, o in (v or {}).items()} for k, v in table.items()}

    def commit_offset(self, topic: str, group: str, queue_id: int, offset: int) -> None:
        self.offset_table.setdefault(f"{topic}@{group}", {})[queue_id] = offset

    def query_offset(self, topic: str, group: str, queue_id: int) -> int:
        return self.offset_table.get(f"{topic}@{group}", {}).get(queue_id, -1)


class DelayOffsetTable(_OffsetTableFile):
    """``config/delayOffset.json``: ``{"offsetTable":{level:offset}}``."""

    FILE = "delayOffset.json"

    offset_table: dict[int, int]

    def _parse_table(self, table: dict) -> dict[int, int]:
        return {int(k): int(v) for k, v in table.items()}
