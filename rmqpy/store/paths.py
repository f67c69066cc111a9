"""The one place a topic or queue becomes a path under the store.

Topics come from clients (directly, or as ``%RETRY%<group>`` / ``%DLQ%<group>``), so a name
such as ``../../x`` must never leave the store root: RocketMQ 4.9.7 created a consume-queue
file outside its store for exactly that. Every caller that maps a name to a directory goes
through :func:`store_subpath`, which refuses unsafe components and then resolves the result
and checks it still lies under the (resolved) root.
"""
from __future__ import annotations

import os

from rmqpy.store.mapped_file import StoreError


class StorePathError(StoreError, ValueError):
    """A topic or queue would map outside the store root (or to no proper directory name)."""


def is_safe_name(name: object) -> bool:
    """True for a string usable as one directory name: not empty, ``.`` or ``..``, and free of
    path separators and NUL (cheap; :func:`store_subpath` still resolves)."""
    if not isinstance(name, str) or name in ("", ".", ".."):
        return False
    if "/" in name or "\x00" in name:
        return False
    return not (os.sep in name or (os.altsep is not None and os.altsep in name))


def store_subpath(root: str, *parts: str) -> str:
    """``root/part/...`` after checking each part is one safe name and that the resolved path
    (symbolic links followed) stays under the resolved ``root``; else :class:`StorePathError`."""
    for part in parts:
        if not is_safe_name(part):
            raise StorePathError(f"{part!r} is not a valid name for a directory under the store root {root}")
    path = os.path.join(root, *parts)
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real == real_root or os.path.commonpath([real_root, real]) != real_root:
        raise StorePathError(f"{path} resolves to {real}, outside the store root {real_root}")
    return path


def consume_queue_path(root: str, topic: str, queue_id: int) -> str:
    """Directory of one consume queue: ``<consumequeue root>/<topic>/<queueId>``."""
    if isinstance(queue_id, bool) or not isinstance(queue_id, int) or queue_id < 0:
        raise StorePathError(f"queue id {queue_id!r} of topic {topic!r} is not a non-negative integer")
    return store_subpath(root, topic, str(queue_id))


def topic_path(root: str, topic: str) -> str:
    """Directory of all consume queues of ``topic`` (deleted with it)."""
    return store_subpath(root, topic)
