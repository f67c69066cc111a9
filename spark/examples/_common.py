"""Shared set-up of the examples: a SparkSession that can import rmqpy and rmqpy_spark."""
from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def session(app: str):
    for p in (str(REPO), str(REPO / "spark")):
        if p not in sys.path:
            sys.path.insert(0, p)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "spark"), os.environ.get("PYTHONPATH", "")])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.appName(app).master(os.environ.get("SPARK_MASTER", "local[*]"))
             .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
             .config("spark.buffer.size", "1048576")  # Python worker <-> JVM socket buffers (spark/README.md)
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    from rmqpy_spark import register
    register(spark)
    return spark
