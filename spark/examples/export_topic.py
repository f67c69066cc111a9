"""Export one topic to Parquet (body as binary, properties as a map).

    python3 spark/examples/export_topic.py /path/to/store TOPIC /out/dir [--start 2024-01-01T00:00] [--end ...]
"""
import argparse

from _common import session

ap = argparse.ArgumentParser()
ap.add_argument("store")
ap.add_argument("topic")
ap.add_argument("out")
ap.add_argument("--start")
ap.add_argument("--end")
a = ap.parse_args()

spark = session("rocketmq-export-topic")
r = spark.read.format("rocketmq").option("topics", a.topic).option("partitioning", "consumequeue")
if a.start:
    r = r.option("startTime", a.start)
if a.end:
    r = r.option("endTime", a.end)
df = r.load(a.store)
df.write.mode("overwrite").partitionBy("queueId").parquet(a.out)
print(f"exported {spark.read.parquet(a.out).count()} messages of {a.topic} to {a.out}")
