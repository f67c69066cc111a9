"""Store tool: ``python -m rmqpy.store verify|stats|dump PATH [--from N] [--to N]``.

Opens the store read-only: no lock, no abort marker, no recovery writes.  Works on
stores written by rmqpy or by the Java broker.  File sizes are taken from the files.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from rmqpy.protocol.message import RecordError, decode_record
from rmqpy.store import readonly
from rmqpy.store.checkpoint import StoreCheckpoint
from rmqpy.store.consume_queue import INT_MAX, ConsumeQueue
from rmqpy.store.mapped_file import StoreError
from rmqpy.store.paths import StorePathError

try:
    from tqdm import tqdm
except ImportError:  # pragma: no cover
    tqdm = None


class ReadOnlyStore:
    def __init__(self, root: str, commitlog_dir: str | None = None):
        self.root = root
        if not os.path.isdir(root):
            raise StoreError(f"{root}: no such store directory")
        self.cl_dir = commitlog_dir or os.path.join(root, "commitlog")
        self.commit_log = readonly.open_commit_log(self.cl_dir)
        self.cl_file_size = self.commit_log.file_size
        self.cq_dir = os.path.join(root, "consumequeue")
        self.cqs: list[ConsumeQueue] = []
        for topic, q in readonly.list_consume_queues(self.cq_dir):
            try:
                cq = readonly.open_consume_queue(self.cq_dir, topic, q)
            except StorePathError as e:  # a directory symlinked out of the store
                print(f"ignoring consume queue: {e}", file=sys.stderr)
                continue
            if cq is not None:
                self.cqs.append(cq)
        cp = os.path.join(root, "checkpoint")
        self.checkpoint = StoreCheckpoint(cp, readonly=True) if os.path.exists(cp) else None

    def close(self) -> None:
        self.commit_log.close()
        for cq in self.cqs:
            cq.close()


def _progress(total: int, desc: str):
    if tqdm is None or not sys.stderr.isatty() and total < (64 << 20):
        return None
    return tqdm(total=total, unit="B", unit_scale=True, desc=desc, file=sys.stderr)


def scan_commitlog(store: ReadOnlyStore, start: int | None = None, end: int | None = None):
    """Returns (records, bytes, end_offset, problem or None, offsets→(size, topic, qid, qoff))."""
    cl = store.commit_log
    lo = cl.get_min_offset() if start is None else start
    hi = cl.get_max_offset() if end is None else end
    bar = _progress(max(0, hi - lo), "scan")
    count = 0
    nbytes = 0
    problem = None
    index = {}
    last = lo
    end_off = lo
    for off, d in cl.iter_records(lo, hi, check_crc=True):
        if not d.success:
            mf = cl.queue.find_mapped_file_by_offset(off)
            assert mf is not None  # iter_records has just read it
            pos = off - mf.file_from_offset
            head = mf.mm[pos:pos + 8] if mf.mm is not None else b""
            if head.strip(b"\x00"):
                problem = f"invalid record at offset {off}: {d.reason}"
            end_off = off
            break
        count += 1
        nbytes += d.size
        index[off] = (d.size, d.topic, d.queue_id, d.queue_offset, d.sys_flag)
        end_off = off + d.size
        if bar is not None and off - last > (1 << 20):
            bar.update(off - last)
            last = off
    else:
        end_off = max(end_off, lo)
    if bar is not None:
        bar.update(max(0, end_off - last))
        bar.close()
    return count, nbytes, end_off, problem, index


def cmd_stats(store: ReadOnlyStore, args) -> int:
    cl = store.commit_log
    out: dict[str, Any] = {
        "storePathRootDir": store.root,
        "abnormalExit": os.path.exists(os.path.join(store.root, "abort")),
        "commitLog": {
            "files": [f.file_name for f in cl.queue.files],
            "fileSize": store.cl_file_size,
            "minOffset": cl.get_min_offset(),
        },
        "consumeQueues": {},
    }
    count, nbytes, end, problem, _ = scan_commitlog(store, max(cl.get_min_offset(), (cl.queue.files[-1].file_from_offset
                                                               if cl.queue.files else 0)))
    out["commitLog"]["maxOffset"] = end
    if problem:
        out["commitLog"]["tailProblem"] = problem
    for cq in store.cqs:
        out["consumeQueues"].setdefault(cq.topic, {})[str(cq.queue_id)] = {
            "minOffset": cq.get_min_offset_in_queue(), "maxOffset": cq.get_max_offset_in_queue(),
            "maxPhysicOffset": cq.get_max_physic_offset()}
    if store.checkpoint is not None:
        cp = store.checkpoint
        out["checkpoint"] = {"physicMsgTimestamp": cp.physic_msg_timestamp,
                             "logicsMsgTimestamp": cp.logics_msg_timestamp,
                             "indexMsgTimestamp": cp.index_msg_timestamp}
    idx = os.path.join(store.root, "index")
    out["indexFiles"] = sorted(os.listdir(idx)) if os.path.isdir(idx) else []
    json.dump(out, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


def cmd_verify(store: ReadOnlyStore, args) -> int:
    count, nbytes, end, problem, index = scan_commitlog(store, args.from_, args.to)
    problems = []
    if problem:
        problems.append(problem)
    cl_min = store.commit_log.get_min_offset()
    cq_units = 0
    for cq in store.cqs:
        lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
        for i in range(lo, hi):
            u = cq.get_unit(i)
            if u is None:
                problems.append(f"consume queue {cq.topic}/{cq.queue_id}: unit {i} unreadable")
                break
            off, size, _tags = u
            if off == 0 and size == INT_MAX:
                continue
            cq_units += 1
            if off < cl_min or (args.from_ is not None and off < args.from_) or (args.to is not None and off >= args.to):
                continue
            rec = index.get(off)
            if rec is None:
                problems.append(f"consume queue {cq.topic}/{cq.queue_id} unit {i} -> commit log offset {off} "
                                f"is not a valid record start")
            elif rec[0] != size or rec[1] != cq.topic or rec[2] != cq.queue_id or rec[3] != i:
                problems.append(f"consume queue {cq.topic}/{cq.queue_id} unit {i} -> {off}: size/topic/queue/"
                                f"offset mismatch (record {rec[:4]}, unit size {size})")
            if len(problems) > 100:
                break
    report = {"records": count, "bytes": nbytes, "endOffset": end, "consumeQueueUnits": cq_units,
              "problems": problems, "ok": not problems}
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0 if not problems else 1


def cmd_dump(store: ReadOnlyStore, args) -> int:
    cl = store.commit_log
    lo = cl.get_min_offset() if args.from_ is None else args.from_
    hi = args.to
    n = 0
    for off, d in cl.iter_records(lo, hi, check_crc=False):
        if not d.success:
            break
        if args.topic and d.topic != args.topic:
            continue
        data = cl.get_data(off, d.size)
        assert data is not None  # iter_records has just read it
        try:
            m = decode_record(data, 0, check_crc=False)
        except RecordError as e:
            print(json.dumps({"offset": off, "error": str(e)}))
            break
        body = m.body or b""
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        rec = {"offset": off, "size": m.store_size, "topic": m.topic, "queueId": m.queue_id,
               "queueOffset": m.queue_offset, "msgId": m.msg_id, "sysFlag": m.sys_flag, "flag": m.flag,
               "bornTimestamp": m.born_timestamp, "bornHost": "%s:%d" % m.born_host,
               "storeTimestamp": m.store_timestamp, "storeHost": "%s:%d" % m.store_host,
               "reconsumeTimes": m.reconsume_times, "preparedTransactionOffset": m.prepared_transaction_offset,
               "properties": m.properties, "bodyLength": len(body)}
        if text is not None:
            rec["body"] = text[:args.body_chars]
        else:
            rec["bodyHex"] = body[:args.body_chars].hex()
        print(json.dumps(rec, ensure_ascii=False))
        n += 1
        if args.limit and n >= args.limit:
            break
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m rmqpy.store", description=__doc__.splitlines()[0])
    p.add_argument("command", choices=["verify", "stats", "dump"])
    p.add_argument("path", help="storePathRootDir")
    p.add_argument("--commitlog", help="storePathCommitLog (default PATH/commitlog)")
    p.add_argument("--from", dest="from_", type=int, default=None, help="first commit log offset")
    p.add_argument("--to", type=int, default=None, help="end commit log offset (exclusive)")
    p.add_argument("--topic", default=None, help="dump: only this topic")
    p.add_argument("--limit", type=int, default=0, help="dump: at most N records")
    p.add_argument("--body-chars", type=int, default=200, help="dump: body preview length")
    args = p.parse_args(argv)
    try:
        store = ReadOnlyStore(args.path, args.commitlog)
    except (StoreError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        return {"verify": cmd_verify, "stats": cmd_stats, "dump": cmd_dump}[args.command](store, args)
    except BrokenPipeError:
        return 0
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
