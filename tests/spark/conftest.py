"""A local SparkSession (local[2]) for the Spark data source tests, one per module."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPARK_PKG = ROOT / "spark"
if str(SPARK_PKG) not in sys.path:
    sys.path.insert(0, str(SPARK_PKG))



# One SparkSession per module, not per process: a process holds one active session, and
# SparkSession.builder.getOrCreate() elsewhere (tests/spark/standalone.py's cluster session in
# tests/interop/test_spark_cluster_java.py) returns a live one whatever master it asks for and
# stops it when done. Run in one process after a session-wide local session (as pytest-xdist's
# longest-first order did), that module ran on local[2] instead of its cluster and left the
# later modules a stopped session without the rocketmq source (DATA_SOURCE_NOT_FOUND).
@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark", reason="pyspark not installed (pip install -r spark/requirements.txt)")
    pytest.importorskip("pyarrow")
    pytest.importorskip("numpy")
    from pyspark.sql import SparkSession

    path = os.pathsep.join([str(ROOT), str(SPARK_PKG)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    os.environ["PYTHONPATH"] = path
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    s = (SparkSession.builder.master("local[2]").appName("rmqpy-spark-tests")
         .config("spark.driver.memory", "1g")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.executorEnv.PYTHONPATH", path)
         .config("spark.sql.session.timeZone", "UTC")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    from rmqpy_spark import register
    register(s)
    yield s
    s.stop()
