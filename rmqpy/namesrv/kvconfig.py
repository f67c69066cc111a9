"""KV config by namespace, persisted as Java's ``kvConfig.json``: ``{"configTable":{ns:{k:v}}}``.

Java's ``KVConfigManager`` takes any namespace, key and value and rewrites the whole file on
the request thread for every put. Any client may send PUT_KV_CONFIG, so rmqpy bounds what it
keeps (:class:`KVLimits`, the ``kvConfigMax*`` name server keys; a put over a bound is refused
with an error answer) and writes the file off the reactor, coalesced: one write at a time in a
thread, and the puts that arrive meanwhile share the next one. A put is answered once the file
that holds it is written, as in Java.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure

from rmqpy.common.filewrite import write_file_atomically
from rmqpy.protocol import fastjson
from rmqpy.remoting.ratelimit import RateLimitedLogger


class KVLimitError(ValueError):
    """A put over one of the :class:`KVLimits`; the message is the error answer's remark."""


@dataclass
class KVLimits:
    """rmqpy's bounds (Java has none); defaults are the ``NamesrvConfig`` ones."""
    max_key_length: int = 255       # kvConfigMaxKeyLength: namespace and key, characters
    max_value_length: int = 16384   # kvConfigMaxValueLength: characters
    max_keys: int = 10000           # kvConfigMaxKeys: keys of all namespaces together

    def check(self, table: dict[str, dict[str, str]], count: int, namespace: str, key: str, value: str) -> None:
        for what, text in (("namespace", namespace), ("key", key)):
            if len(text) > self.max_key_length:
                raise KVLimitError(f"the KV config {what} is longer than kvConfigMaxKeyLength {self.max_key_length}")
        if len(value) > self.max_value_length:
            raise KVLimitError(f"the KV config value is longer than kvConfigMaxValueLength {self.max_value_length}")
        if count >= self.max_keys and key not in table.get(namespace, ()):
            raise KVLimitError(f"the KV config holds kvConfigMaxKeys {self.max_keys} keys already")


class KVConfigManager:
    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped

    def __init__(self, path: str, limits: KVLimits | None = None,
                 in_thread: Callable[..., defer.Deferred] | None = None, clock: IReactorTime | None = None) -> None:
        """``in_thread(fn, *args)`` runs a file write off the reactor (the controller passes
        ``deferToThreadPool`` on its reactor); without it, writes run inline (tools, tests)."""
        self.log = self.log.on(clock)
        self.path = path
        self.table: dict[str, dict[str, str]] = {}
        self.limits = limits or KVLimits()
        self._in_thread = in_thread
        self._count = 0                                   # keys of all namespaces
        self.version = 0                                  # bumped by every change of the table
        self._writing = False                             # a write is under way
        self._waiting: list[defer.Deferred] | None = None  # puts for the write after it

    def load(self) -> None:
        """Read the file if present; a corrupt file is an error naming it (nothing is lost)."""
        if not os.path.exists(self.path):
            return
        with open(self.path, "rb") as fh:
            raw = fh.read()
        if not raw.strip():
            return
        try:
            doc = fastjson.loads(raw)
            table = doc.get("configTable") or {}
            self.table = {str(ns): {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items()}
            self.version += 1
        except (ValueError, AttributeError) as exc:
            raise ValueError(f"cannot load KV config file {self.path}: {exc}") from None
        self._count = sum(map(len, self.table.values()))

    def persist(self) -> None:
        """Write the file now, on this thread."""
        write_file_atomically(self.path, fastjson.dumps({"configTable": self.table}, pretty=True))

    def schedule_persist(self) -> defer.Deferred:
        """A Deferred that fires once a file holding the table as it is now is written (or
        fails with the write's error): the write starts now if none is under way, else after
        it, shared by every caller until then."""
        d: defer.Deferred = defer.Deferred()
        if self._writing:
            if self._waiting is None:
                self._waiting = []
            self._waiting.append(d)
        else:
            self._start_write([d])
        return d

    def _start_write(self, waiters: list[defer.Deferred]) -> None:
        self._writing = True
        snapshot = {"configTable": {ns: dict(kv) for ns, kv in self.table.items()}}

        def write() -> None:
            write_file_atomically(self.path, fastjson.dumps(snapshot, pretty=True))

        if self._in_thread is not None:
            done = self._in_thread(write)
        else:
            done = defer.maybeDeferred(write)
        done.addBoth(self._write_done, waiters)

    def _write_done(self, result: Any, waiters: list[defer.Deferred]) -> None:
        self._writing = False
        if isinstance(result, Failure):
            self.log.error("persist {path} failed: {err}", path=self.path, err=result.getErrorMessage())
        nxt, self._waiting = self._waiting, None
        if nxt:
            self._start_write(nxt)
        for d in waiters:
            if isinstance(result, Failure):
                d.errback(result)
            else:
                d.callback(None)

    def put(self, namespace: str, key: str, value: str) -> defer.Deferred:
        """Set ``key``; raises :class:`KVLimitError` over a limit (nothing changed). The
        Deferred fires when the file holds it."""
        self.limits.check(self.table, self._count, namespace, key, value)
        kv = self.table.setdefault(namespace, {})
        if key not in kv:
            self._count += 1
        kv[key] = value
        self.version += 1
        self.log.info("putKVConfig {ns} {key}={value}", ns=namespace, key=key, value=value)
        return self.schedule_persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> defer.Deferred:
        kv = self.table.get(namespace)
        if kv is not None and kv.pop(key, None) is not None:
            self._count -= 1
            self.version += 1
            return self.schedule_persist()  # an emptied namespace stays, as in Java: it lists as {}
        return defer.succeed(None)

    def list_namespace(self, namespace: str) -> dict[str, str] | None:
        kv = self.table.get(namespace)
        return dict(kv) if kv is not None else None
