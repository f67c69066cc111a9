"""An rmqpy store as an AutoSwitch HA master, driven at store level (no broker, no controller):
``python -m tests.interop.autoswitch_master --store DIR [--count N] [--body-size B]
[--timeout S] [store config key=value ...]``.

Opens the store, becomes master of epoch 1 (``AutoSwitchHAService.change_to_master``), puts half
the messages, is re-elected in epoch 2 (``change_to_master_when_last_role_is_master``), puts the
rest, listens for replicas on a free port of 0.0.0.0 and prints ``{"haPort", "maxOffset",
"epochs"}``. Once a replica acknowledged the max offset it prints ``{"acked": [[broker id,
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


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--store", required=True)
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

    def put(i: int) -> defer.Deferred:
        body = (f"message {i} ".encode() * (a.body_size // 10 + 1))[:a.body_size]
        return store.put_message(MessageExtBrokerInner(
            topic="TopicAutoSwitchRmqpy", queue_id=i % 4, body=body, properties={"KEYS": f"k{i}", "TAGS": "a"},
            born_host=("127.0.0.1", 5555), born_timestamp=1_700_000_000_000 + i))

    async def run() -> None:
        service.change_to_master(1)
        await service.role_change
        for i in range(a.count // 2):
            await put(i)
        service.change_to_master_when_last_role_is_master(2)
        for i in range(a.count // 2, a.count):
            await put(i)
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
