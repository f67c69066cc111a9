"""Config files written off the reactor (ConfigManager.save): the periodic consumer-offset persist and
topic updates run their JSON and fsync in a thread, a file never goes back to an older copy whichever
of the reactor and the writer thread writes last, and an admin update is answered after the write."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from twisted.internet import defer

from rmqpy.broker.offsets import ConsumerOffsetManager
from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.admin import CreateTopicRequestHeader
from tests.unit.broker.helpers import FakeChannel, make_broker


def _file_offsets(path: Path) -> dict[str, dict[int, int]]:
    return {k: {int(q): o for q, o in v.items()} for k, v in fastjson.loads(path.read_text())["offsetTable"].items()}


def _held_thread(name: str) -> tuple[Any, threading.Event, threading.Event, list[str]]:
    """An ``in_thread`` running each call in a real thread, held until ``release`` is set."""
    started, release = threading.Event(), threading.Event()
    writes: list[str] = []

    def in_thread(fn: Any, *args: Any) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()

        def run() -> None:
            writes.append(threading.current_thread().name)
            started.set()
            release.wait(10)
            fn(*args)
            d.callback(None)  # fine here: nothing runs on a reactor in these tests

        threading.Thread(target=run, name=name).start()
        return d
    return in_thread, started, release, writes


def _wait(d: defer.Deferred) -> None:
    for _ in range(200):
        if d.called:
            return
        threading.Event().wait(0.05)
    raise AssertionError("the write did not end")


def test_an_older_copy_never_overwrites_a_newer_one(tmp_path: Path) -> None:
    m = ConsumerOffsetManager(str(tmp_path))
    in_thread, started, release, _ = _held_thread("offset-writer")
    m.write_off_reactor(in_thread)
    m.commit_offset("c", "G", "T", 0, 5)
    saved = m.save()  # copied now, written by a thread that is slow to get to it
    assert started.wait(10)
    m.commit_offset("c", "G", "T", 0, 9)
    m.persist()  # shutdown or a slave's sync writes the newer table meanwhile
    release.set()
    _wait(saved)
    assert _file_offsets(tmp_path / "consumerOffset.json") == {"T@G": {0: 9}}


def test_the_periodic_persist_writes_in_a_thread_and_shutdown_waits_for_it(tmp_path: Path) -> None:
    broker, clock = make_broker(tmp_path)
    in_thread, started, release, writes = _held_thread("offset-writer")
    broker.consumer_offset_manager.writer.in_thread = in_thread
    broker.consumer_offset_manager.commit_offset("c", "G", "T", 1, 42)
    broker.persist_offsets()  # returns while the write is held in its thread
    assert started.wait(10) and writes == ["offset-writer"]
    path = tmp_path / "store" / "config" / "consumerOffset.json"
    assert not path.exists() or "T@G" not in path.read_text()
    idle = broker.consumer_offset_manager.when_saved()
    assert not idle.called
    release.set()
    _wait(idle)
    assert _file_offsets(path)["T@G"] == {1: 42}
    broker.shutdown()
    clock.advance(1)


def test_update_topic_is_answered_once_a_thread_wrote_the_file(tmp_path: Path) -> None:
    """UPDATE_AND_CREATE_TOPIC: the reactor copies the table, a thread writes it (20,000 topics:
    240 ms of JSON and fsync that stalled every client), and the answer waits for the write, as
    Java answers after its file write."""
    broker, clock = make_broker(tmp_path)
    in_thread, started, release, writes = _held_thread("config-writer")
    broker.topic_config_manager.writer.in_thread = in_thread
    header = CreateTopicRequestHeader(topic="Held", defaultTopic="TBW102", readQueueNums=2, writeQueueNums=2,
                                      perm=6, topicFilterType="SINGLE_TAG")
    broker.started = False  # no name server registration in this test
    answer = broker.dispatcher.dispatch(FakeChannel(), RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                                                               header))
    assert started.wait(10) and writes == ["config-writer"]
    path = tmp_path / "store" / "config" / "topics.json"
    assert "Held" not in path.read_text()
    assert isinstance(answer, defer.Deferred) and not answer.called  # not answered before the file has it
    release.set()
    _wait(answer)
    assert '"Held"' in path.read_text()
    broker.shutdown()
    clock.advance(1)
