package io.rmqpy.interop.harness;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * roundtrip: sync-send COUNT messages with unique keys, then push-consume
 * them with a fresh group and check every one came back intact (topic, tag,
 * keys, body, user property).
 */
public final class RoundtripCommand implements Command {
    @Override
    public String name() {
        return "roundtrip";
    }

    @Override
    public String usage() {
        return "roundtrip -n NAMESRV -t TOPIC [-g GROUP] [-c 10] [--tags TAG] [--body-size BYTES]\n"
            + "    [--timeout-ms 30000] [--run-id ID] + client options\n"
            + "  Emits sent and received events, then done with ok/missing/mismatched; exit 1 unless all match.";
    }

    @Override
    public Action prepare(Args a) {
        final Common.ClientOptions client = Common.ClientOptions.read(a);
        final String topic = a.required("topic");
        final String runId = a.str("run-id", UUID.randomUUID().toString().substring(0, 8));
        final String group = a.str("group", "harness_rt_" + runId);
        final int count = a.integer("count", 10);
        final String tag = a.str("tags", "rt");
        final int bodySize = a.integer("body-size", -1);
        final long timeoutMs = a.lng("timeout-ms", 30000);
        return out -> {
            long start = System.currentTimeMillis();
            Map<String, byte[]> expected = new LinkedHashMap<>();
            DefaultMQProducer producer = new DefaultMQProducer(group + "_p");
            client.apply(producer);
            producer.start();
            int sent = 0;
            try {
                for (int i = 0; i < count; i++) {
                    String key = "rt-" + runId + "-" + i;
                    byte[] body = Common.body("roundtrip {run} #{i} ", bodySize, i, runId);
                    Message m = new Message(topic, tag, key, body);
                    m.putUserProperty("rtIndex", Integer.toString(i));
                    try {
                        SendResult r = producer.send(m);
                        out.event("sent").putAll(ProduceCommand.sentFields(i, m, r, 256)).emit();
                        if (r.getSendStatus() == SendStatus.SEND_OK) {
                            expected.put(key, body);
                            sent++;
                        }
                    } catch (Exception e) {
                        out.event("error").put("i", i).putAll(Common.errorFields(e)).emit();
                        break;
                    }
                }
            } finally {
                Common.shutdownQuietly(producer::shutdown, 10000);
            }

            final Map<String, String> mismatched = new ConcurrentHashMap<>();
            final Map<String, Boolean> seen = new ConcurrentHashMap<>();
            final CountDownLatch all = new CountDownLatch(expected.size());
            DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group + "_c");
            client.apply(consumer);
            consumer.setInstanceName(consumer.getInstanceName() + "_c");
            consumer.setConsumeFromWhere(Common.consumeFrom("first"));
            consumer.subscribe(topic, tag);
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    out.event("received").putAll(Common.messageFields(m, 256)).emit();
                    String key = m.getKeys();
                    byte[] want = key == null ? null : expected.get(key);
                    if (want == null) {
                        continue; // not ours (e.g. an earlier run on the same topic)
                    }
                    String problem = null;
                    if (!Arrays.equals(want, m.getBody())) {
                        problem = "body differs";
                    } else if (!topic.equals(m.getTopic()) || !tag.equals(m.getTags())) {
                        problem = "topic/tag differs: " + m.getTopic() + "/" + m.getTags();
                    } else if (!key.endsWith("-" + m.getUserProperty("rtIndex"))) {
                        problem = "user property rtIndex differs: " + m.getUserProperty("rtIndex");
                    }
                    if (problem != null) {
                        mismatched.put(key, problem);
                    }
                    if (seen.putIfAbsent(key, Boolean.TRUE) == null) {
                        all.countDown();
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            boolean complete;
            try {
                complete = all.await(Math.max(1, timeoutMs - (System.currentTimeMillis() - start)),
                    TimeUnit.MILLISECONDS);
            } finally {
                Common.shutdownQuietly(consumer::shutdown, 10000);
            }
            TreeSet<String> missing = new TreeSet<>(expected.keySet());
            missing.removeAll(seen.keySet());
            boolean ok = complete && sent == count && mismatched.isEmpty();
            out.event("done").put("command", "roundtrip").put("ok", ok).put("sent", sent)
                .put("received", seen.size()).put("missing", missing).put("mismatched", mismatched)
                .put("runId", runId).put("elapsedMs", System.currentTimeMillis() - start).emit();
            return ok ? 0 : 1;
        };
    }
}
