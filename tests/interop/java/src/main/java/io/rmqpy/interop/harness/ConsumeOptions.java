package io.rmqpy.interop.harness;

import java.util.function.Consumer;

import org.apache.rocketmq.common.consumer.ConsumeFromWhere;

/** The options consume-push and consume-lite share, read and applied alike by both. */
class ConsumeOptions {
    String topic;
    String group;
    int count;
    long timeoutMs;
    long lingerMs;
    String tags;
    String sql;
    boolean broadcast;
    String from;
    int pullBatch;
    int maxBodyPrint;

    /** Reads the shared options; a bad --from is a usage error here, not a failure at start. */
    final void readShared(Args a) {
        topic = a.required("topic");
        group = a.required("group");
        count = a.integer("count", 0);
        timeoutMs = a.lng("timeout-ms", 30000);
        lingerMs = a.lng("linger-ms", 0);
        tags = a.str("tags", "*");
        sql = a.str("sql", null);
        broadcast = a.bool("broadcast", false);
        from = a.str("from", "first");
        Common.consumeFrom(from);
        pullBatch = a.integer("pull-batch", 0);
        maxBodyPrint = a.integer("max-body-print", 1024);
    }

    /** Where to start (--from, with its timestamp) and the message model (--broadcast), on either consumer. */
    final void applyStart(Object consumer, Consumer<ConsumeFromWhere> setFrom, Consumer<String> setTimestamp)
        throws Exception {
        setFrom.accept(Common.consumeFrom(from));
        String ts = Common.consumeTimestamp(from);
        if (ts != null) {
            setTimestamp.accept(ts);
        }
        if (broadcast) {
            Common.setEnumProperty(consumer, "setMessageModel", "BROADCASTING");
        }
    }
}
