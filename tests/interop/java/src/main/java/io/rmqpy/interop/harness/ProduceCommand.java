package io.rmqpy.interop.harness;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

/** produce: sends messages in sync / async / oneway / batch mode. */
public final class ProduceCommand implements Command {
    @Override
    public String name() {
        return "produce";
    }

    @Override
    public String usage() {
        return "produce -n NAMESRV -t TOPIC [-g GROUP] [-c COUNT] [--mode sync|async|oneway|batch]\n"
            + "    [--tags A[,B,...]] (cycled over messages)  [--keys TEMPLATE]  [--body TEMPLATE] [--body-size BYTES]\n"
            + "    [--prop KEY=TEMPLATE]... [--delay-level L] [--flag N] [--wait-store-msg-ok true|false]\n"
            + "    [--queue-id Q [--broker-name B]] (MessageQueueSelector: fixed queue) | [--queue-mod M] (queue = i % M)\n"
            + "    [--batch-size N] (batch mode; default all in one batch) [--send-timeout-ms 3000] [--retries N]\n"
            + "    [--compress-over BYTES] [--max-message-size BYTES] [--async-wait-ms MS] [--continue-on-error]\n"
            + "    [--run-id ID] [--max-body-print 256] + client options\n"
            + "  Templates: {i} = message index, {run} = run id. Emits sent/error events, then done.";
    }

    @Override
    public Action prepare(Args a) {
        final Common.ClientOptions client = Common.ClientOptions.read(a);
        final P p = new P();
        p.topic = a.required("topic");
        p.group = a.str("group", "harness_producer");
        p.count = a.integer("count", 1);
        p.mode = a.choice("mode", "sync", "sync", "async", "oneway", "batch");
        String tags = a.str("tags", null);
        p.tags = tags == null ? null : tags.split(",");
        p.keys = a.str("keys", null);
        p.body = a.str("body", "hello-{i}");
        p.bodySize = a.integer("body-size", -1);
        p.props = a.keyValues("prop");
        p.delayLevel = a.integer("delay-level", 0);
        p.flag = a.integer("flag", 0);
        p.waitStoreMsgOk = a.bool("wait-store-msg-ok", true);
        p.queueId = a.has("queue-id") ? a.integer("queue-id", 0) : null;
        p.brokerName = a.str("broker-name", null);
        p.queueMod = a.integer("queue-mod", 0);
        p.batchSize = a.integer("batch-size", 0);
        p.sendTimeoutMs = a.integer("send-timeout-ms", 3000);
        p.retries = a.has("retries") ? a.integer("retries", 2) : null;
        p.compressOver = a.integer("compress-over", 0);
        p.maxMessageSize = a.integer("max-message-size", 0);
        p.asyncWaitMs = a.lng("async-wait-ms", 0);
        p.continueOnError = a.bool("continue-on-error", false);
        p.runId = a.str("run-id", UUID.randomUUID().toString().substring(0, 8));
        p.maxBodyPrint = a.integer("max-body-print", 256);
        if (p.queueId != null && p.queueMod > 0) {
            throw new Args.UsageException("--queue-id and --queue-mod exclude each other");
        }
        return out -> run(client, p, out);
    }

    static final class P {
        String topic;
        String group;
        int count;
        String mode;
        String[] tags;
        String keys;
        String body;
        int bodySize;
        Map<String, String> props;
        int delayLevel;
        int flag;
        boolean waitStoreMsgOk;
        Integer queueId;
        String brokerName;
        int queueMod;
        int batchSize;
        int sendTimeoutMs;
        Integer retries;
        int compressOver;
        int maxMessageSize;
        long asyncWaitMs;
        boolean continueOnError;
        String runId;
        int maxBodyPrint;
    }

    static Message build(P p, int i) {
        String tag = p.tags == null ? null : p.tags[i % p.tags.length];
        byte[] body = Common.body(p.body, p.bodySize, i, p.runId);
        Message m = new Message(p.topic, tag, Common.expand(p.keys, i, p.runId), p.flag, body, p.waitStoreMsgOk);
        for (Map.Entry<String, String> e : p.props.entrySet()) {
            m.putUserProperty(e.getKey(), Common.expand(e.getValue(), i, p.runId));
        }
        if (p.delayLevel > 0) {
            m.setDelayTimeLevel(p.delayLevel);
        }
        return m;
    }

    static Map<String, Object> sentFields(int i, Message m, SendResult r, int maxBodyPrint) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("i", i);
        e.put("status", r.getSendStatus() == null ? null : r.getSendStatus().name());
        e.put("msgId", r.getMsgId());
        e.put("offsetMsgId", r.getOffsetMsgId());
        MessageQueue mq = r.getMessageQueue();
        e.put("topic", mq == null ? (m == null ? null : m.getTopic()) : mq.getTopic());
        e.put("brokerName", mq == null ? null : mq.getBrokerName());
        e.put("queueId", mq == null ? null : mq.getQueueId());
        e.put("queueOffset", r.getQueueOffset());
        e.put("transactionId", r.getTransactionId());
        e.put("regionId", r.getRegionId());
        if (m != null) {
            e.put("tags", m.getTags());
            e.put("keys", m.getKeys());
            Common.putBody(e, m.getBody(), maxBodyPrint);
        }
        return e;
    }

    /** Selector: arg is the fixed queue id (or -1 - index for --queue-mod). */
    static MessageQueueSelector selector(final String brokerName) {
        return (mqs, msg, arg) -> {
            List<MessageQueue> candidates = new ArrayList<>();
            for (MessageQueue mq : mqs) {
                if (brokerName == null || brokerName.equals(mq.getBrokerName())) {
                    candidates.add(mq);
                }
            }
            int want = (Integer) arg;
            if (want < 0) {
                // --queue-mod: position in the (sorted) route list
                return candidates.isEmpty() ? null : candidates.get((-1 - want) % candidates.size());
            }
            for (MessageQueue mq : candidates) {
                if (mq.getQueueId() == want) {
                    return mq;
                }
            }
            throw new IllegalArgumentException("no queue with queueId=" + want
                + (brokerName == null ? "" : " on broker " + brokerName) + " in " + mqs);
        };
    }

    private int run(Common.ClientOptions client, P p, Out out) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(p.group, client.rpcHook());
        client.apply(producer);
        producer.setSendMsgTimeout(p.sendTimeoutMs);
        if (p.retries != null) {
            producer.setRetryTimesWhenSendFailed(p.retries);
            producer.setRetryTimesWhenSendAsyncFailed(p.retries);
        }
        if (p.compressOver > 0) {
            producer.setCompressMsgBodyOverHowmuch(p.compressOver);
        }
        if (p.maxMessageSize > 0) {
            producer.setMaxMessageSize(p.maxMessageSize);
        }
        long start = System.currentTimeMillis();
        final AtomicInteger ok = new AtomicInteger();
        final AtomicInteger failed = new AtomicInteger();
        producer.start();
        try {
            MessageQueueSelector sel = (p.queueId != null || p.queueMod > 0) ? selector(p.brokerName) : null;
            switch (p.mode) {
                case "sync":
                    for (int i = 0; i < p.count; i++) {
                        Message m = build(p, i);
                        try {
                            SendResult r = sel != null
                                ? producer.send(m, sel, selArg(p, i), p.sendTimeoutMs)
                                : producer.send(m, p.sendTimeoutMs);
                            out.event("sent").putAll(sentFields(i, m, r, p.maxBodyPrint)).emit();
                            if (r.getSendStatus() == SendStatus.SEND_OK) {
                                ok.incrementAndGet();
                            } else {
                                failed.incrementAndGet();
                            }
                        } catch (Exception e) {
                            failed.incrementAndGet();
                            out.event("error").put("i", i).putAll(Common.errorFields(e)).emit();
                            if (!p.continueOnError) {
                                break;
                            }
                        }
                    }
                    break;
                case "oneway":
                    for (int i = 0; i < p.count; i++) {
                        Message m = build(p, i);
                        try {
                            if (sel != null) {
                                producer.sendOneway(m, sel, selArg(p, i));
                            } else {
                                producer.sendOneway(m);
                            }
                            ok.incrementAndGet();
                            Map<String, Object> e = new LinkedHashMap<>();
                            e.put("i", i);
                            e.put("status", "ONEWAY");
                            e.put("msgId", m.getProperty("UNIQ_KEY"));
                            e.put("tags", m.getTags());
                            e.put("keys", m.getKeys());
                            Common.putBody(e, m.getBody(), p.maxBodyPrint);
                            out.event("sent").putAll(e).emit();
                        } catch (Exception e) {
                            failed.incrementAndGet();
                            out.event("error").put("i", i).putAll(Common.errorFields(e)).emit();
                            if (!p.continueOnError) {
                                break;
                            }
                        }
                    }
                    break;
                case "async": {
                    final CountDownLatch latch = new CountDownLatch(p.count);
                    int issued = 0;
                    for (int i = 0; i < p.count; i++) {
                        final int idx = i;
                        final Message m = build(p, i);
                        SendCallback cb = new SendCallback() {
                            @Override
                            public void onSuccess(SendResult r) {
                                out.event("sent").putAll(sentFields(idx, m, r, p.maxBodyPrint)).emit();
                                if (r.getSendStatus() == SendStatus.SEND_OK) {
                                    ok.incrementAndGet();
                                } else {
                                    failed.incrementAndGet();
                                }
                                latch.countDown();
                            }

                            @Override
                            public void onException(Throwable e) {
                                failed.incrementAndGet();
                                out.event("error").put("i", idx).putAll(Common.errorFields(e)).emit();
                                latch.countDown();
                            }
                        };
                        try {
                            if (sel != null) {
                                producer.send(m, sel, selArg(p, i), cb, p.sendTimeoutMs);
                            } else {
                                producer.send(m, cb, p.sendTimeoutMs);
                            }
                            issued++;
                        } catch (Exception e) {
                            failed.incrementAndGet();
                            latch.countDown();
                            out.event("error").put("i", i).putAll(Common.errorFields(e)).emit();
                            if (!p.continueOnError) {
                                for (int k = i + 1; k < p.count; k++) {
                                    latch.countDown();
                                }
                                break;
                            }
                        }
                    }
                    long wait = p.asyncWaitMs > 0 ? p.asyncWaitMs
                        : (long) p.sendTimeoutMs * (1 + (p.retries == null ? 2 : p.retries)) + 5000;
                    if (!latch.await(wait, TimeUnit.MILLISECONDS)) {
                        out.event("error").put("class", "HarnessTimeout")
                            .put("message", "async callbacks missing after " + wait + " ms: " + latch.getCount()
                                + " of " + issued)
                            .emit();
                        failed.addAndGet((int) latch.getCount());
                    }
                    break;
                }
                case "batch": {
                    int bs = p.batchSize > 0 ? p.batchSize : Math.max(1, p.count);
                    MessageQueue fixed = null;
                    if (sel != null) {
                        List<MessageQueue> mqs = producer.fetchPublishMessageQueues(p.topic);
                        fixed = sel.select(mqs, null, selArg(p, 0));
                    }
                    for (int i = 0; i < p.count; i += bs) {
                        List<Message> batch = new ArrayList<>();
                        for (int k = i; k < Math.min(p.count, i + bs); k++) {
                            batch.add(build(p, k));
                        }
                        try {
                            SendResult r = fixed != null
                                ? producer.send(batch, fixed, p.sendTimeoutMs)
                                : producer.send(batch, p.sendTimeoutMs);
                            Map<String, Object> e = sentFields(i, null, r, p.maxBodyPrint);
                            e.put("topic", p.topic);
                            e.put("batchSize", batch.size());
                            e.put("msgIds", r.getMsgId() == null ? null : Arrays.asList(r.getMsgId().split(",")));
                            e.put("offsetMsgIds", r.getOffsetMsgId() == null ? null
                                : Arrays.asList(r.getOffsetMsgId().split(",")));
                            out.event("sent").putAll(e).emit();
                            if (r.getSendStatus() == SendStatus.SEND_OK) {
                                ok.addAndGet(batch.size());
                            } else {
                                failed.addAndGet(batch.size());
                            }
                        } catch (Exception e) {
                            failed.addAndGet(batch.size());
                            out.event("error").put("i", i).put("batchSize", batch.size())
                                .putAll(Common.errorFields(e)).emit();
                            if (!p.continueOnError) {
                                break;
                            }
                        }
                    }
                    break;
                }
                default:
                    throw new IllegalStateException(p.mode);
            }
        } finally {
            Common.shutdownQuietly(producer::shutdown, 10000);
        }
        boolean success = ok.get() == p.count && failed.get() == 0;
        out.event("done").put("command", "produce").put("mode", p.mode).put("ok", success)
            .put("sent", ok.get()).put("failed", failed.get()).put("runId", p.runId)
            .put("elapsedMs", System.currentTimeMillis() - start).emit();
        return success ? 0 : 1;
    }

    private static Integer selArg(P p, int i) {
        return p.queueId != null ? p.queueId : -1 - (i % p.queueMod);
    }
}
