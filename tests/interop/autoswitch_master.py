"""An rmqpy store as an AutoSwitch HA master, driven at store level (no broker, no controller):
``python -m tests.interop.autoswitch_master --store DIR [--epochs 1,2] [--first I] [--count N]
[--body-size B] [--timeout S] [store config key=value ...]``.

Opens the store (new, or one left by an earlier run), becomes master of the first epoch
(``AutoSwitchHAService.change_to_master``), puts an equal share of the ``--count`` messages
(numbered from ``--first``, :func:`message`) in each epoch, being re-elected for the next ones
(``change_to_master_when_last_role_is_master``), listens for replicas on a free port of 0.0.0.0
and prints ``{"haPort", "maxOffset", "epochs"}``. Once a replica acknowledged the max offset it prints ``{"acked": [[broker id,
offset]], "syncStateSet": [...]}`` and exits 0; 1 after ``--timeout`` seconds.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys

from twisted.internet import defer, reactor, task

from rmqpy.protocol.message import MessageExtBrokerInner
from rmqpy.store.config import MessageStoreConfig
from rmqpy.store.ha.autoswitch.api import AutoSwitchSettings
from rmqpy.store.ha.autoswitch.service import AutoSwitchHAService
from rmqpy.store.message_store import MessageStore


def message(i: int, body_size: int = 600) -> MessageExtBrokerInner:
    """The ``i``-th message: its size depends on ``i`` and ``body_size`` only."""
    body = (f"message {i:06d} ".encode() * (body_size // 10 + 1))[:body_size]
    return MessageExtBrokerInner(
        topic="TopicAutoSwitchRmqpy", queue_id=i % 4, body=body, properties={"KEYS": f"k{i:06d}", "TAGS": "a"},
        born_host=("127.0.0.1", 5555), born_timestamp=1_700_000_000_000 + i)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--store", required=True)
    p.add_argument("--epochs", default="1,2")
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--count", type=int, default=2000)
    p.add_argument("--body-size", type=int, default=600)
    p.add_argument("--timeout", type=float, default=40.0)
    p.add_argument("config", nargs="*")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    props = dict(kv.split("=", 1) for kv in a.config)
    config = MessageStoreConfig.from_properties({"storePathRootDir": a.store, **props})
    store = MessageStore(config, ("127.0.0.1", 10911), reactor)
    store.load()
    store.start()
    service = AutoSwitchHAService(reactor, store, AutoSwitchSettings.from_store_config(config), store.blocking.run)
    service.set_local_broker_id(1)
    service.set_sync_state_set({1})
    outcome = {"code": 1}

    async def run() -> None:
        epochs = [int(e) for e in a.epochs.split(",")]
        share = a.count // len(epochs)
        for n, epoch in enumerate(epochs):
            if n == 0:
                service.change_to_master(epoch)
                await service.role_change
            else:
                service.change_to_master_when_last_role_is_master(epoch)
            for i in range(a.first + n * share, a.first + (n + 1) * share):
                await store.put_message(message(i, a.body_size))
        port = reactor.listenTCP(0, service, interface="0.0.0.0")
        end = store.get_max_phy_offset()
        print(json.dumps({"haPort": port.getHost().port, "maxOffset": end,
                          "epochs": [[e.epoch, e.start_offset] for e in service.epoch_entries()]}), flush=True)
        while not any(r.ack_offset >= end for r in service.replicas()):
            await task.deferLater(reactor, 0.05, lambda: None)
        print(json.dumps({"acked": [[r.broker_id, r.ack_offset] for r in service.replicas()],
                          "syncStateSet": sorted(service.sync_state_set())}), flush=True)
        outcome["code"] = 0

    def stop(_: object) -> None:
        service.shutdown()
        store.shutdown()
        reactor.stop()

    reactor.callWhenRunning(lambda: defer.ensureDeferred(run()).addErrback(
        lambda f: print(f.getTraceback(), file=sys.stderr)).addBoth(stop))
    reactor.callLater(a.timeout, lambda: reactor.running and stop(None))
    reactor.run()
    return outcome["code"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
