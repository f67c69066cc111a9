import json
import os
import subprocess
import sys

import pytest

from rmqpy.broker.configfile import read_config, write_config
from rmqpy.broker.offsets import ConsumerOffsetManager, DelayOffsetManager
from rmqpy.protocol import fastjson
from rmqpy.store.config import MessageStoreConfig, parse_delay_levels

from .conftest import msg


def test_config_from_properties():
    c = MessageStoreConfig.from_properties({"storePathRootDir": "/x", "mappedFileSizeCommitLog": "1024",
                                            "flushDiskType": "SYNC_FLUSH", "messageIndexSafe": "true",
                                            "brokerName": "ignored"})
    assert c.mappedFileSizeCommitLog == 1024 and c.sync_flush and c.messageIndexSafe is True
    assert c.commitlog_dir == "/x/commitlog"
    assert MessageStoreConfig().mappedFileSizeConsumeQueue == 6_000_000
    with pytest.raises(ValueError, match="mappedFileSizeCommitLog"):
        MessageStoreConfig.from_properties({"mappedFileSizeCommitLog": "big"})
    with pytest.raises(ValueError):
        MessageStoreConfig.from_properties({"flushDiskType": "SOMETIMES"})
    assert parse_delay_levels("1s 5s 2m 1h")[4] == 3_600_000
    assert len(MessageStoreConfig().delay_levels) == 18


def test_consumer_offset_unquoted_int_keys(tmp_path):
    d = tmp_path / "config"
    d.mkdir()
    # as written by Java 4.9 fastjson (pretty, unquoted int keys)
    (d / "consumerOffset.json").write_text('{\n\t"offsetTable":{\n\t\t"T@G":{0:12,1:7\n\t\t}\n\t}\n}')
    t = ConsumerOffsetManager(str(d))
    t.load()
    assert t.table == {"T@G": {0: 12, 1: 7}}
    assert t.query_offset("G", "T", 1) == 7 and t.query_offset("G", "T", 5) == -1
    t.commit_offset("127.0.0.1", "G", "T", 2, 99)
    t.persist()
    text = (d / "consumerOffset.json").read_text()
    assert "0:12" in text and '"0"' not in text
    assert (d / "consumerOffset.json.bak").exists()
    t2 = ConsumerOffsetManager(str(d))
    t2.load()
    assert t2.table["T@G"] == {0: 12, 1: 7, 2: 99}


def test_delay_offset(tmp_path):
    t = DelayOffsetManager(str(tmp_path))
    t.load()
    t.table = {1: 0, 3: 5}
    t.persist()
    assert "1:0" in (tmp_path / "delayOffset.json").read_text()
    t2 = DelayOffsetManager(str(tmp_path))
    t2.load()
    assert t2.table == {1: 0, 3: 5}


def test_corrupt_config_falls_back_to_bak(tmp_path):
    path = str(tmp_path / "topics.json")
    write_config(path, fastjson.dumps({"a": 1}, pretty=True))
    write_config(path, fastjson.dumps({"a": 2}, pretty=True))
    (tmp_path / "topics.json").write_text('{"a": 3,,,')  # corrupt main file
    assert read_config(path) == {"a": 1}  # .bak holds the previous content
    (tmp_path / "topics.json.bak").write_text("garbage{")
    assert read_config(path) is None
    assert read_config(str(tmp_path / "none.json")) is None


def _run_tool(*args):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run([sys.executable, "-m", "rmqpy.store", *args], capture_output=True, text=True, env=env)


def _snapshot(root):
    out = {}
    for dp, _dn, fn in os.walk(root):
        for n in fn:
            p = os.path.join(dp, n)
            st = os.stat(p)
            with open(p, "rb") as f:
                out[p] = (st.st_size, hash(f.read()))
    return out


def test_tool_verify_stats_dump_read_only(harness):
    harness.open()
    for i in range(400):
        harness.put(msg(qid=i % 2, keys=f"k{i}"))
    harness.close()
    root = str(harness.root)
    before = _snapshot(root)
    r = _run_tool("verify", root)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert rep["records"] == 400 and rep["ok"] and rep["consumeQueueUnits"] == 400
    r = _run_tool("stats", root)
    st = json.loads(r.stdout)
    assert st["consumeQueues"]["T"]["0"]["maxOffset"] == 200
    r = _run_tool("dump", root, "--limit", "3")
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["queueOffset"] for x in lines] == [0, 0, 1] and lines[0]["properties"]["KEYS"] == "k0"
    r = _run_tool("dump", root, "--from", str(lines[1]["offset"]), "--to", str(lines[2]["offset"]))
    assert len(r.stdout.splitlines()) == 1
    assert _snapshot(root) == before
    assert not os.path.exists(os.path.join(root, "abort"))


def test_tool_reports_flipped_byte(harness):
    s = harness.open()
    for _i in range(50):
        harness.put(msg())
    phy = s.get_commit_log_offset_in_queue("T", 0, 20)
    harness.close()
    p = os.path.join(str(harness.root), "commitlog", "%020d" % 0)
    with open(p, "r+b") as f:
        f.seek(phy + 95)
        b = f.read(1)
        f.seek(phy + 95)
        f.write(bytes([b[0] ^ 0x55]))
    r = _run_tool("verify", str(harness.root))
    assert r.returncode == 1
    rep = json.loads(r.stdout)
    assert rep["records"] == 20 and any(f"offset {phy}" in x for x in rep["problems"])
    assert _run_tool("stats", str(harness.root) + "/nonexistent").returncode == 2
