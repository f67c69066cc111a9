import pytest
from twisted.internet.task import Clock

from rmqpy.protocol.message import MessageExtBrokerInner
from rmqpy.store.config import MessageStoreConfig
from rmqpy.store.message_store import MessageStore

STORE_HOST = ("127.0.0.1", 10911)
T0 = 1_700_000_000.0


def small_config(root, **kw) -> MessageStoreConfig:
    base = dict(storePathRootDir=str(root), mappedFileSizeCommitLog=64 * 1024,
                mappedFileSizeConsumeQueue=20 * 50, maxHashSlotNum=64, maxIndexNum=256)
    base.update(kw)
    return MessageStoreConfig(**base)


def msg(topic="T", qid=0, body=b"x" * 100, tags=None, keys=None, uniq=None, **kw) -> MessageExtBrokerInner:
    props = {}
    if tags is not None:
        props["TAGS"] = tags
    if keys is not None:
        props["KEYS"] = keys
    if uniq is not None:
        props["UNIQ_KEY"] = uniq
    props.update(kw.pop("props", {}))
    return MessageExtBrokerInner(topic=topic, queue_id=qid, body=body, properties=props,
                                 born_host=("10.1.2.3", 5555), born_timestamp=123, **kw)


class StoreHarness:
    def __init__(self, root, **cfg):
        self.root = root
        self.cfg = cfg
        self.clock = Clock()
        self.clock.advance(T0)
        self.store = None

    def open(self, **extra) -> MessageStore:
        c = dict(self.cfg)
        c.update(extra)
        self.store = MessageStore(small_config(self.root, **c), STORE_HOST, self.clock)
        assert self.store.load()
        self.store.start()
        return self.store

    def put(self, m):
        out = []
        self.store.put_message(m).addCallback(out.append)
        assert out, "put did not complete"
        return out[0]

    def close(self):
        if self.store is not None:
            self.store.shutdown()
            self.store = None

    def crash(self):
        """Simulate kill -9: drop the store without shutdown (abort file stays)."""
        s = self.store
        s.shutdown_flag = True
        for slot in s._timers:
            if slot[0].active():
                slot[0].cancel()
        s.commit_log.close()
        for qs in s.consume_queue_table.values():
            for cq in qs.values():
                cq.close()
        s.index_service.close()
        s.checkpoint.close()
        s._unlock()
        self.store = None


@pytest.fixture
def harness(tmp_path):
    h = StoreHarness(tmp_path / "store")
    yield h
    if h.store is not None:
        h.close()
