"""Follow a store (e.g. a running broker's) and append new messages to Parquet, exactly once.

    python3 spark/examples/stream_to_parquet.py /path/to/store /out/dir /checkpoint/dir [--once] [--topics A,B]
"""
import argparse

from _common import session

ap = argparse.ArgumentParser()
ap.add_argument("store")
ap.add_argument("out")
ap.add_argument("checkpoint")
ap.add_argument("--topics")
ap.add_argument("--once", action="store_true", help="Trigger.AvailableNow: read what is there, then stop")
a = ap.parse_args()

spark = session("rocketmq-stream")
r = spark.readStream.format("rocketmq").option("startingOffsets", "earliest")
if a.topics:
    r = r.option("topics", a.topics)
w = (r.load(a.store).writeStream.format("parquet").option("path", a.out)
     .option("checkpointLocation", a.checkpoint))
q = (w.trigger(availableNow=True) if a.once else w.trigger(processingTime="5 seconds")).start()
q.awaitTermination()
