"""The documented ``rmqpy-admin`` and ``curl`` lines, run as a reader would type them (issue 30).

tests/unit/test_docs_blocks.py checks without servers that every documented command names something
that exists. This module runs the ones a reader types against a running name server and broker:
every ``rmqpy-admin`` and ``curl`` line of README.md, docs/*.md and spark/README.md, block by block
and in the order written, on one rmqpy cluster started here. Only what differs between the reader's
machine and this one is replaced: the documented addresses (``127.0.0.1:9876``, ``:10911``,
``:5557``) by the cluster's, ``$NAMESRV_ADDR`` set as a reader would, and a ``<placeholder>`` by the
value the text asks for (a message id of the block's topic). A block that needs a message (a query
by key) gets one sent by the official protocol after the block has created its topic, as the
surrounding text tells the reader to do. Each line must exit 0 and write no traceback; a ``curl |
grep`` line must find what it greps.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rmqpy.client import Message, Producer, PullConsumer
from tests.interop import servers
from tests.unit.test_docs_blocks import CASES

pytestmark = pytest.mark.interop
ROOT = Path(__file__).resolve().parents[2]
#: the documented lines this module runs: rmqpy's admin tool and the metrics endpoint
RUN = re.compile(r"^(rmqpy-admin|curl)\s")
PLACEHOLDER = re.compile(r"<[^<>]+>")


def documented_lines() -> list[tuple[str, list[str]]]:
    """(where, lines) of each block with a line :data:`RUN` takes, comments and blank lines left out."""
    out = []
    for path, number, lines in CASES:
        runnable = [line.strip() for line in lines if RUN.match(line.strip())]
        if runnable:
            out.append((f"{path}:{number}", runnable))
    return out


BLOCKS = documented_lines()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    metrics_port = servers.free_port()
    props = {"metricsExporterType": "PROM", "metricsPromExporterPort": metrics_port,
             "metricsPromExporterHost": "127.0.0.1"}
    with servers.Cluster(tmp_path_factory.mktemp("docs"), "127.0.0.1", props) as c:
        c.metrics_port = metrics_port
        yield c


def _admin() -> list[str]:
    found = shutil.which("rmqpy-admin")
    return [found] if found else [sys.executable, "-m", "rmqpy.tools.admin"]


def _as_here(line: str, c, message_ids: dict[str, str]) -> str:
    broker_port = c.broker_addr.rsplit(":", 1)[1]
    line = line.replace("127.0.0.1:9876", c.ns_addr).replace("127.0.0.1:10911", f"127.0.0.1:{broker_port}")
    line = line.replace("127.0.0.1:5557", f"127.0.0.1:{c.metrics_port}")
    topic = re.search(r"-t (\S+)", line)
    if PLACEHOLDER.search(line):
        assert topic and topic.group(1) in message_ids, f"no value for the placeholder of {line!r}"
        line = PLACEHOLDER.sub(message_ids[topic.group(1)], line)
    return line


def _consumer_for(line: str, c, block: list[str]) -> PullConsumer | None:
    """Before a documented ``consumerProgress -g G``: the consumer the text presupposes, online in G and
    holding an offset of the block's topic."""
    group = re.search(r"consumerProgress .*-g (\S+)", line)
    topic = next((m.group(1) for x in block if (m := re.search(r"updateTopic .*-t (\S+)", x))), None)
    if not group or not topic:
        return None
    consumer = PullConsumer(c.ns_addr, group=group.group(1))
    queue = consumer.fetch_queues(topic)[0]
    consumer.pull(queue, 0)
    consumer.commit_offset(queue, consumer.max_offset(queue))
    return consumer


def _keyed_message_for(line: str, c, message_ids: dict[str, str]) -> None:
    """After a documented ``updateTopic``: the message a later documented query of that topic asks for."""
    topic = re.search(r"-t (\S+)", line)
    if "updateTopic" not in line or not topic:
        return
    key = next((m.group(1) for _, lines in BLOCKS for x in lines
                if f"-t {topic.group(1)}" in x and (m := re.search(r"queryMsgByKey .*-k (\S+)", x))), None)
    if key is None:
        return
    with Producer(c.ns_addr, group="PDocs") as producer:
        result = producer.send(Message(topic.group(1), b"documented", keys=key))
    message_ids[topic.group(1)] = result.msg_id


@pytest.mark.parametrize("where,lines", BLOCKS, ids=[where for where, _ in BLOCKS])
def test_documented_lines_run_as_written(cluster, where: str, lines: list[str]) -> None:
    message_ids: dict[str, str] = {}
    env = dict(os.environ, NAMESRV_ADDR=cluster.ns_addr)
    for documented in lines:
        line = _as_here(documented, cluster, message_ids)
        consumer = _consumer_for(line, cluster, lines)
        if line.startswith("rmqpy-admin "):
            argv = _admin() + line.split("#", 1)[0].split()[1:]
            run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        else:  # a curl line, perhaps piped into grep: as a shell runs it
            run = subprocess.run(["bash", "-o", "pipefail", "-c", line], env=env, capture_output=True, text=True,
                                 timeout=60)
        if consumer is not None:
            consumer.shutdown()
        assert run.returncode == 0 and "Traceback" not in run.stderr, \
            f"{where}: {documented!r} exited {run.returncode}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
        _keyed_message_for(line, cluster, message_ids)


def test_every_documented_admin_command_is_run() -> None:
    """The blocks above are found: a change of the docs' layout would not silently run nothing."""
    commands = {line.split()[1] for _, lines in BLOCKS for line in lines if line.startswith("rmqpy-admin")}
    assert {"clusterList", "updateTopic", "topicList", "queryMsgByKey", "consumerProgress"} <= commands, commands
    assert any(line.startswith("curl") for _, lines in BLOCKS for line in lines)
