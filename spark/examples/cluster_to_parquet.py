"""Follow topics of a live cluster into Parquet (broker mode), committing the job's offsets for a group.

    SPARK_MASTER=spark://host:7077 python3 spark/examples/cluster_to_parquet.py NAMESRV TOPICS OUT CHECKPOINT \
        [--group spark_export] [--once]

NAMESRV is ``host:port`` (several separated by ';'), TOPICS a comma list. ``--once`` reads what is
there now and stops (Trigger.AvailableNow); otherwise the query runs until interrupted.
"""
import argparse

from _common import session

ap = argparse.ArgumentParser()
ap.add_argument("namesrv")
ap.add_argument("topics")
ap.add_argument("out")
ap.add_argument("checkpoint")
ap.add_argument("--group")
ap.add_argument("--once", action="store_true")
a = ap.parse_args()

spark = session("rocketmq-cluster-to-parquet")
r = (spark.readStream.format("rocketmq").option("nameServer", a.namesrv).option("topic", a.topics)
     .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 200000))
if a.group:
    r = r.option("group", a.group)  # mqadmin consumerProgress -g GROUP shows the job's lag
w = (r.load().writeStream.format("parquet").option("path", a.out).option("checkpointLocation", a.checkpoint)
     .partitionBy("topic"))
q = (w.trigger(availableNow=True) if a.once else w.trigger(processingTime="10 seconds")).start()
q.awaitTermination()
