"""SYNC_MASTER under kill -9: every send the master acknowledged is on the slave.

An rmqpy name server, an rmqpy SYNC_MASTER and its rmqpy slave run as real processes. Each
round, ``--producers`` threads send messages (raw SEND_MESSAGE_V2, WAIT=true) to the master;
after a random 0.3-2.5 s the master gets SIGKILL. Every send answered SUCCESS (not
FLUSH_SLAVE_TIMEOUT, not SLAVE_NOT_AVAILABLE) must then be in the slave's commit log at the
offset its offsetMsgId names, with the same UNIQ_KEY. The master restarts (abnormal recovery),
the slave reconnects and the next round begins. Not part of CI:

    PYTHONPATH=. python3 bench/ha_kill9_loop.py --rounds 20
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rmqpy.protocol.codes import RequestCode, ResponseCode  # noqa: E402
from rmqpy.protocol.command import RemotingCommand  # noqa: E402
from rmqpy.protocol.message import RecordError, create_uniq_id, decode_record  # noqa: E402
from rmqpy.tools.blocking_client import BlockingClient  # noqa: E402
from tests.interop import servers  # noqa: E402

TOPIC = "TopicKill9"


def send(client: BlockingClient, i: int, uniq: str) -> RemotingCommand:
    ext = {"a": "PGKill9", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(i % 4), "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": f"UNIQ_KEY\x01{uniq}\x02WAIT\x01true\x02",
           "j": "0", "k": "false", "m": "false", "n": "broker-ha"}
    return client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, body=b"k" * 300, ext_fields=ext))


def producer(addr: str, stop: threading.Event, acked: list[tuple[str, int]], counts: dict[int, int]) -> None:
    try:
        client = BlockingClient(addr, timeout=5)
    except OSError:
        return
    i = 0
    while not stop.is_set():
        uniq = create_uniq_id()
        try:
            r = send(client, i, uniq)
        except (OSError, ConnectionError):
            return
        counts[r.code] = counts.get(r.code, 0) + 1
        if r.code == ResponseCode.SUCCESS:
            acked.append((uniq, int((r.ext_fields or {})["msgId"][-16:], 16)))
        i += 1


def runtime(addr: str) -> dict[str, str]:
    with BlockingClient(addr, timeout=3) as c:
        r = c.invoke(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
    return json.loads(r.body)["table"]


def slave_has(store: Path, file_size: int, phy: int, uniq: str) -> bool:
    f = store / "commitlog" / f"{phy - phy % file_size:020d}"
    if not f.exists():
        return False
    with open(f, "rb") as fh:
        fh.seek(phy % file_size)
        data = fh.read(4096)
    try:
        return decode_record(data, 0, check_crc=True).properties.get("UNIQ_KEY") == uniq
    except RecordError:
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--role", default="SYNC_MASTER", help="ASYNC_MASTER shows what the check catches")
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="rmqpy-ha-kill9-"))
    file_size = 1024 * 1024
    common = {"brokerName": "broker-ha", "mappedFileSizeCommitLog": file_size, "brokerIP2": "127.0.0.1"}
    ns = servers.start_namesrv(tmp / "ns")
    master_port = servers.free_port()
    master = servers.start_broker(tmp / "master", ns.addr, port=master_port,
                                  props={**common, "brokerRole": args.role, "listenPort": master_port})
    slave = servers.start_broker(tmp / "slave", ns.addr, props={**common, "brokerRole": "SLAVE", "brokerId": 1})
    total_acked = 0
    failures = 0
    try:
        for rnd_no in range(1, args.rounds + 1):
            deadline = time.time() + 30
            while int(runtime(master.addr).get("haSlaveAckOffset", -1)) < 0:
                if time.time() > deadline:
                    raise SystemExit("the slave did not reconnect within 30 s")
                time.sleep(0.2)
            stop = threading.Event()
            acked: list[tuple[str, int]] = []
            counts: dict[int, int] = {}
            threads = [threading.Thread(target=producer, args=(master.addr, stop, acked, counts))
                       for _ in range(args.producers)]
            for t in threads:
                t.start()
            time.sleep(rnd.uniform(0.3, 2.5))
            master.kill9()
            stop.set()
            for t in threads:
                t.join(10)
            missing = [(u, p) for u, p in list(acked) if not slave_has(slave.workdir / "store", file_size, p, u)]
            total_acked += len(acked)
            failures += len(missing)
            print(f"round {rnd_no}: {len(acked)} acknowledged, answers {counts}, missing on the slave "
                  f"{len(missing)}", flush=True)
            master.start(60)
    finally:
        slave.stop()
        master.stop()
        ns.stop()
    print(f"{args.rounds} rounds, {total_acked} acknowledged sends, {failures} missing on the slave")
    if failures == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"kept {tmp}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
