"""An rmqpy store as an AutoSwitch HA replica, driven at store level (no broker, no controller
client): ``python -m tests.interop.autoswitch_replica --store DIR --master-ha HOST:PORT
--broker-id N --until OFFSET [--timeout S] [--linger S] [store config key=value ...]``.

Opens the store, makes it a replica (``AutoSwitchHAService.change_to_slave``) of the master's
HA port, waits until its commit log reaches ``--until`` (then prints ``{"reached": ...}``),
stays connected ``--linger`` seconds more and prints one JSON line: its max offset, epochs and
confirm offset; exit 0, or 1 on the timeout.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys

from twisted.internet import reactor, task

from rmqpy.store.config import MessageStoreConfig
from rmqpy.store.ha.autoswitch.api import AutoSwitchSettings
from rmqpy.store.ha.autoswitch.service import AutoSwitchHAService
from rmqpy.store.message_store import MessageStore


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--store", required=True)
    p.add_argument("--master-ha", required=True)
    p.add_argument("--broker-id", type=int, default=2)
    p.add_argument("--until", type=int, required=True)
    p.add_argument("--timeout", type=float, default=40.0)
    p.add_argument("--linger", type=float, default=0.0, help="seconds to stay connected after --until")
    p.add_argument("config", nargs="*")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    props = dict(kv.split("=", 1) for kv in a.config)
    config = MessageStoreConfig.from_properties({"storePathRootDir": a.store, **props})
    store = MessageStore(config, ("127.0.0.1", 10911), reactor)
    store.load()
    store.start()
    service = AutoSwitchHAService(reactor, store, AutoSwitchSettings.from_store_config(config), store.blocking.run)
    result: dict[str, object] = {}

    def finish(ok: bool) -> None:
        result.update(ok=ok, maxOffset=store.get_max_phy_offset(), confirmOffset=service.confirm_offset(),
                      epochs=[[e.epoch, e.start_offset] for e in service.epoch_entries()],
                      connected=service.client is not None and service.client.is_connected())
        service.shutdown()
        d = service.epochs.when_written()
        d.addBoth(lambda _: (store.shutdown(), reactor.stop()))

    def check() -> None:
        if store.get_max_phy_offset() >= a.until:
            loop.stop()
            print(json.dumps({"reached": store.get_max_phy_offset()}), flush=True)
            reactor.callLater(a.linger, finish, True)

    loop = task.LoopingCall(check)
    reactor.callWhenRunning(lambda: service.change_to_slave("", 0, a.broker_id, master_ha_address=a.master_ha))
    reactor.callWhenRunning(loop.start, 0.1)
    reactor.callLater(a.timeout, lambda: (loop.running and (loop.stop(), finish(False))))
    reactor.run()
    print(json.dumps(result), flush=True)
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
