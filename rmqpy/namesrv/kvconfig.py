"""KV config by namespace, persisted as Java's ``kvConfig.json``: ``{"configTable":{ns:{k:v}}}``."""
from __future__ import annotations

import os

from twisted.logger import Logger

from rmqpy.protocol import fastjson


class KVConfigManager:
    log = Logger()

    def __init__(self, path: str) -> None:
        self.path = path
        self.table: dict[str, dict[str, str]] = {}

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
        except (ValueError, AttributeError) as exc:
            raise ValueError(f"cannot load KV config file {self.path}: {exc}") from None

    def persist(self) -> None:
        text = fastjson.dumps({"configTable": self.table}, pretty=True)
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if os.path.exists(self.path):
            os.replace(self.path, self.path + ".bak")
        os.replace(tmp, self.path)

    def put(self, namespace: str, key: str, value: str) -> None:
        self.table.setdefault(namespace, {})[key] = value
        self.log.info("putKVConfig {ns} {key}={value}", ns=namespace, key=key, value=value)
        self.persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        kv = self.table.get(namespace)
        if kv is not None and kv.pop(key, None) is not None:
            self.persist()  # an emptied namespace stays, as in Java: it lists as {}

    def list_namespace(self, namespace: str) -> dict[str, str] | None:
        kv = self.table.get(namespace)
        return dict(kv) if kv is not None else None
