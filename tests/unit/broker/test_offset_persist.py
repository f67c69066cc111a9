"""The periodic consumer-offset persist runs its JSON and fsync off the reactor, and the offsets file
never goes back to an older copy, whichever of the reactor and the writer thread writes last."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from twisted.internet import defer

from rmqpy.broker.offsets import ConsumerOffsetManager
from rmqpy.protocol import fastjson
from tests.unit.broker.helpers import make_broker


def _file_offsets(path: Path) -> dict[str, dict[int, int]]:
    return {k: {int(q): o for q, o in v.items()} for k, v in fastjson.loads(path.read_text())["offsetTable"].items()}


def test_an_older_copy_never_overwrites_a_newer_one(tmp_path: Path) -> None:
    m = ConsumerOffsetManager(str(tmp_path))
    m.commit_offset("c", "G", "T", 0, 5)
    old = m.snapshot()  # taken for the thread, which is slow to write it
    m.commit_offset("c", "G", "T", 0, 9)
    m.persist()  # shutdown or a slave's sync writes the newer table meanwhile
    m.write_snapshot(old)
    assert _file_offsets(tmp_path / "consumerOffset.json") == {"T@G": {0: 9}}


def test_the_periodic_persist_writes_in_a_thread_and_shutdown_waits_for_it(tmp_path: Path) -> None:
    broker, clock = make_broker(tmp_path)
    started, release = threading.Event(), threading.Event()
    writes: list[str] = []

    def in_thread(fn: Any, *args: Any) -> defer.Deferred:
        # a real thread, held until released: the reactor's part must not wait for it
        d: defer.Deferred = defer.Deferred()

        def run() -> None:
            writes.append(threading.current_thread().name)
            started.set()
            release.wait(10)
            fn(*args)
            d.callback(None)  # fine here: nothing runs on a reactor in this test

        threading.Thread(target=run, name="offset-writer").start()
        return d

    broker.offset_writer.in_thread = in_thread
    broker.consumer_offset_manager.commit_offset("c", "G", "T", 1, 42)
    broker.persist_offsets()  # returns while the write is held in its thread
    assert started.wait(10) and writes == ["offset-writer"]
    path = tmp_path / "store" / "config" / "consumerOffset.json"
    assert not path.exists() or "T@G" not in path.read_text()
    idle = broker.offset_writer.when_idle()
    assert not idle.called
    release.set()
    for _ in range(100):
        if idle.called:
            break
        threading.Event().wait(0.05)
    assert idle.called and _file_offsets(path)["T@G"] == {1: 42}
    broker.shutdown()
    clock.advance(1)
