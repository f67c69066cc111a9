"""Per-topic message counts and sizes over time (hourly, by store time).

    python3 spark/examples/topic_stats.py /path/to/store [--bucket '1 hour'] [--topics A,B]
"""
import argparse

from _common import session

ap = argparse.ArgumentParser()
ap.add_argument("store")
ap.add_argument("--bucket", default="1 hour")
ap.add_argument("--topics")
a = ap.parse_args()

spark = session("rocketmq-topic-stats")
from pyspark.sql import functions as F  # noqa: E402

reader = spark.read.format("rocketmq")
if a.topics:
    reader = reader.option("topics", a.topics)
df = reader.load(a.store)
(df.groupBy("topic", F.window("storeTimestamp", a.bucket).start.alias("from"))
   .agg(F.count("*").alias("messages"), F.sum("size").alias("storedBytes"),
        F.sum(F.length("body")).alias("bodyBytes"), F.max("size").alias("largest"))
   .orderBy("topic", "from")
   .show(1000, truncate=False))
