"""Find messages by key (KEYS entry), message id (offsetMsgId) or UNIQ_KEY.

    python3 spark/examples/find_by_key.py /path/to/store KEY [--topic T]
"""
import argparse

from _common import session

ap = argparse.ArgumentParser()
ap.add_argument("store")
ap.add_argument("key")
ap.add_argument("--topic")
a = ap.parse_args()

spark = session("rocketmq-find-by-key")
from pyspark.sql import functions as F  # noqa: E402

r = spark.read.format("rocketmq")
if a.topic:
    r = r.option("topics", a.topic)
df = r.load(a.store)
hits = df.where(F.array_contains(F.split("keys", " "), a.key) | (F.col("msgId") == a.key)
                | (F.col("uniqKey") == a.key))
(hits.select("topic", "queueId", "queueOffset", "msgId", "uniqKey", "keys", "tags", "storeTimestamp",
             F.expr("substring(cast(body as string), 1, 80)").alias("body"))
     .show(100, truncate=False))
