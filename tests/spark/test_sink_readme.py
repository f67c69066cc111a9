"""spark/README.md's sink example, run as written (the name server's address put in), against an
rmqpy name server and broker; and what Spark does with a batch write that names no save mode."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rmqpy.tools import admin
from tests.interop import servers

ROOT = Path(__file__).resolve().parents[2]


def readme_sink_example() -> str:
    text = (ROOT / "spark" / "README.md").read_text()
    section = text[text.index("## Writing to a topic"):]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = servers.Cluster(tmp_path_factory.mktemp("sink"), "127.0.0.1")
    assert admin.main(["updateTopic", "-n", c.ns_addr, "-c", "DefaultCluster", "-t", "Orders", "-r", "2", "-w", "2"]) == 0
    yield c
    c.close()


def test_the_readme_sink_example_works_as_written(spark, cluster):
    example = readme_sink_example()
    code = example.replace('"ns:9876"', repr(cluster.ns_addr))
    assert code != example and ".save()" in code
    df = spark.range(3).selectExpr("id", "concat('order-', id) AS item")
    exec(code, {"df": df})

    rows = (spark.read.format("rocketmq").option("nameServer", cluster.ns_addr).option("topic", "Orders").load()
            .select("keys", "tags", "body").collect())
    got = sorted((r["keys"], r["tags"], json.loads(bytes(r["body"]))) for r in rows)
    assert got == [(str(i), "new", {"id": i, "item": f"order-{i}"}) for i in range(3)]


def test_spark_refuses_the_default_save_mode_before_asking_the_source(spark, cluster):
    """Why the README writes .mode("append"): Spark refuses ErrorIfExists (the default) for a V2 data
    source with batch writes, Python ones included; should a Spark take it one day, this fails and
    the README's explanation is to be revisited."""
    from pyspark.errors import AnalysisException

    write = spark.range(1).selectExpr("'x' AS body").write.format("rocketmq").option("nameServer", cluster.ns_addr)
    with pytest.raises(AnalysisException, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        write.option("topic", "Orders").save()
    with pytest.raises(Exception, match="cannot be overwritten"):   # the source's own refusal
        write.option("topic", "Orders").mode("overwrite").save()
