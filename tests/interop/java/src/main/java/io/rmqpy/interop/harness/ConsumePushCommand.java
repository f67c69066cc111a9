package io.rmqpy.interop.harness;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.impl.consumer.ConsumeMessageConcurrentlyService;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * consume-push: DefaultMQPushConsumer, concurrently or orderly, clustering or
 * broadcasting, tag expression or SQL92; stops after COUNT successfully
 * consumed messages or at the timeout.
 */
public final class ConsumePushCommand implements Command {
    /**
     * A push consumer heartbeats every second unless --heartbeat-ms says otherwise, not every 30 s (the
     * client's heartbeatBrokerInterval). The first rebalance that gives a consumer its queues bumps the
     * subscription's subVersion (RebalancePushImpl.messageQueueChanged, 4.9.8 and 5.3.3) and sends a
     * heartbeat only if it gets the heartbeat lock (tryLock). When the client's periodic heartbeat
     * (first run one second after start) holds the lock at that moment, it carries the old subVersion,
     * the new one reaches the broker only with the next periodic heartbeat, and until then every pull
     * is answered SUBSCRIPTION_NOT_LATEST, by the Java brokers (PullMessageProcessor) and rmqpy alike
     * (apache/rocketmq#3434). With the default interval that is 30 s without a message: a 20 s consume
     * in test_mqadmin_commands[5.3.3] got nothing ("sendHeartbeatToAllBrokerWithLockV2 lock heartBeat,
     * but failed." in the client's log, then "the subscription is not latest" for every pull).
     */
    static final int CONSUMER_HEARTBEAT_MS = 1000;

    @Override
    public String name() {
        return "consume-push";
    }

    @Override
    public String usage() {
        return "consume-push -n NAMESRV -t TOPIC -g GROUP [-c COUNT] [--timeout-ms 30000] [--linger-ms 0]\n"
            + "    [--tags EXPR | --sql EXPR] [--orderly] [--broadcast] [--from first|last|timestamp:yyyyMMddHHmmss]\n"
            + "    [--reconsume-later K] (fail the first K deliveries of every message: RECONSUME_LATER, or\n"
            + "      SUSPEND_CURRENT_QUEUE_A_MOMENT when orderly) [--retry-delay-level L] [--suspend-ms MS]\n"
            + "    [--max-reconsume-times N] [--threads N] [--consume-batch N] [--pull-batch N] [--pull-interval-ms MS]\n"
            + "    [--max-body-print 1024] [--stop-file PATH] [--report-assignment] [--hold-offset-query PATH]\n"
            + "    [--pop] [--pop-invisible-ms MS] [--halt-after N]\n"
            + "    + client options\n"
            + "  A push consumer heartbeats every 1000 ms unless --heartbeat-ms is given (CONSUMER_HEARTBEAT_MS).\n"
            + "  COUNT counts successful consumes (0 = just run until the timeout and succeed). --linger-ms keeps\n"
            + "  consuming after COUNT is reached, to catch extra deliveries. Emits started, received (one per\n"
            + "  delivery, with result and delivery number), then done; exit 1 if fewer than COUNT were consumed.\n"
            + "  --stop-file: shut down cleanly (unregister from the broker) as soon as PATH exists, even before\n"
            + "  COUNT (checked every 50 ms; no linger then). --report-assignment: an 'assigned' event with the\n"
            + "  queues this member holds (queueIds of TOPIC, and every \"topic:broker:queueId\" incl. the retry topic)\n"
            + "  every time its rebalance changes them. --hold-offset-query: after each QUERY_CONSUMER_OFFSET of a\n"
            + "  TOPIC queue (offset-read event: queueId, offset, -1 = not found) wait until PATH exists, before\n"
            + "  the client goes on (e.g. to GET_MAX_OFFSET); opens the new-group start window for a test.\n"
            + "  --pop (5.x client only): client rebalance off (setClientRebalance(false)), so the broker's\n"
            + "  QUERY_ASSIGNMENT decides PULL or POP; --pop-invisible-ms sets the pop invisible time.\n"
            + "  --halt-after N: halt the JVM (no ack, no unregister) inside the listener of the Nth delivery.";
    }

    @Override
    public Action prepare(Args a) {
        final Common.ClientOptions client = Common.ClientOptions.read(a);
        if (!a.has("heartbeat-ms")) {
            client.heartbeatMs = CONSUMER_HEARTBEAT_MS;
        }
        final P p = new P();
        p.readShared(a);
        p.orderly = a.bool("orderly", false);
        p.reconsumeLater = a.integer("reconsume-later", 0);
        p.retryDelayLevel = a.has("retry-delay-level") ? a.integer("retry-delay-level", 0) : null;
        p.suspendMs = a.lng("suspend-ms", -1);
        p.maxReconsumeTimes = a.has("max-reconsume-times") ? a.integer("max-reconsume-times", 16) : null;
        p.threads = a.integer("threads", 0);
        p.consumeBatch = a.integer("consume-batch", 0);
        p.pullIntervalMs = a.lng("pull-interval-ms", -1);
        p.stopFile = a.str("stop-file", null);
        p.reportAssignment = a.bool("report-assignment", false);
        p.holdOffsetQuery = a.str("hold-offset-query", null);
        p.pop = a.bool("pop", false);
        p.popInvisibleMs = a.lng("pop-invisible-ms", -1);
        p.haltAfter = a.integer("halt-after", 0);
        return out -> run(client, p, out);
    }

    static final class P extends ConsumeOptions {
        boolean orderly;
        int reconsumeLater;
        Integer retryDelayLevel;
        long suspendMs;
        Integer maxReconsumeTimes;
        int threads;
        int consumeBatch;
        long pullIntervalMs;
        String stopFile;
        boolean reportAssignment;
        String holdOffsetQuery;
        boolean pop;
        long popInvisibleMs;
        int haltAfter;
    }

    private int run(Common.ClientOptions client, P p, Out out) throws Exception {
        final DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(p.group, client.rpcHook(),
            new org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely());
        client.apply(consumer);
        p.applyStart(consumer, consumer::setConsumeFromWhere, consumer::setConsumeTimestamp);
        if (p.maxReconsumeTimes != null) {
            consumer.setMaxReconsumeTimes(p.maxReconsumeTimes);
        }
        if (p.threads > 0) {
            consumer.setConsumeThreadMin(p.threads);
            consumer.setConsumeThreadMax(p.threads);
        }
        if (p.consumeBatch > 0) {
            consumer.setConsumeMessageBatchMaxSize(p.consumeBatch);
        }
        if (p.pullBatch > 0) {
            consumer.setPullBatchSize(p.pullBatch);
        }
        if (p.pullIntervalMs >= 0) {
            consumer.setPullInterval(p.pullIntervalMs);
        }
        if (p.suspendMs >= 0) {
            consumer.setSuspendCurrentQueueTimeMillis(p.suspendMs);
        }
        if (p.holdOffsetQuery != null) {
            consumer.setOffsetStore(HeldOffsetStore.create(consumer, p.topic, Paths.get(p.holdOffsetQuery),
                p.timeoutMs, out));
        }
        if (p.pop) {
            // 5.x API, called by name: the harness is compiled against the 4.9.8 client
            consumer.getClass().getMethod("setClientRebalance", boolean.class).invoke(consumer, false);
            if (p.popInvisibleMs > 0) {
                consumer.getClass().getMethod("setPopInvisibleTime", long.class).invoke(consumer, p.popInvisibleMs);
            }
        }
        if (p.sql != null) {
            consumer.subscribe(p.topic, MessageSelector.bySql(p.sql));
        } else {
            consumer.subscribe(p.topic, p.tags);
        }

        final CountDownLatch enough = new CountDownLatch(Math.max(1, p.count));
        final AtomicInteger deliveries = new AtomicInteger();
        final AtomicInteger consumed = new AtomicInteger();
        final Map<String, AtomicInteger> perMsg = new ConcurrentHashMap<>();
        final Set<String> distinct = ConcurrentHashMap.newKeySet();

        // returns true when the message is accepted
        final java.util.function.Function<MessageExt, Boolean> handle = m -> {
            int n = perMsg.computeIfAbsent(m.getMsgId(), k -> new AtomicInteger()).incrementAndGet();
            boolean accept = n > p.reconsumeLater;
            int delivered = deliveries.incrementAndGet();
            if (p.haltAfter > 0 && delivered > p.haltAfter) {
                // a later delivery on another consume thread: never return (no ack, no offset), and leave
                // the halt to the thread of delivery haltAfter. Halting here could end the JVM before that
                // thread has written its received/halting lines (seen with --halt-after 1: four popped
                // messages on four threads, and the run printed only "started").
                parkForever();
            }
            out.event("received").putAll(Common.messageFields(m, p.maxBodyPrint))
                .put("delivery", n)
                .put("result", accept ? "CONSUME_SUCCESS"
                    : (p.orderly ? "SUSPEND_CURRENT_QUEUE_A_MOMENT" : "RECONSUME_LATER"))
                .put("thread", Thread.currentThread().getName())
                .emit();
            if (p.haltAfter > 0 && delivered == p.haltAfter) {
                out.event("halting").put("deliveries", delivered).emit();
                Runtime.getRuntime().halt(0);
            }
            return accept;
        };

        if (p.orderly) {
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                boolean all = true;
                for (MessageExt m : msgs) {
                    all &= handle.apply(m);
                }
                if (!all) {
                    if (p.suspendMs >= 0) {
                        ctx.setSuspendCurrentQueueTimeMillis(p.suspendMs);
                    }
                    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                }
                countSuccess(msgs, distinct, consumed, enough);
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                boolean all = true;
                for (MessageExt m : msgs) {
                    all &= handle.apply(m);
                }
                if (!all) {
                    if (p.retryDelayLevel != null) {
                        ctx.setDelayLevelWhenNextConsume(p.retryDelayLevel);
                    }
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
                countSuccess(msgs, distinct, consumed, enough);
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }

        long start = System.currentTimeMillis();
        consumer.start();
        out.event("started").put("command", "consume-push").put("group", p.group).put("topic", p.topic)
            .put("clientId", consumer.buildMQClientId()).emit();
        boolean reached;
        boolean stopped = false;
        final Thread watcher = p.reportAssignment ? assignmentWatcher(consumer, p.topic, out) : null;
        try {
            if (p.stopFile != null) {
                // the stop file ends the run at once; otherwise COUNT (if any) or the timeout does
                long deadline = start + p.timeoutMs;
                while (!(stopped = Files.exists(Paths.get(p.stopFile)))
                    && System.currentTimeMillis() < deadline && (p.count <= 0 || enough.getCount() > 0)) {
                    enough.await(50, TimeUnit.MILLISECONDS);
                }
                reached = p.count <= 0 || enough.getCount() == 0;
                if (stopped) {
                    out.event("stopping").put("reason", "stop-file").put("consumed", consumed.get()).emit();
                }
            } else if (p.count > 0) {
                reached = enough.await(p.timeoutMs, TimeUnit.MILLISECONDS);
            } else {
                Thread.sleep(p.timeoutMs);
                reached = true;
            }
            if (p.lingerMs > 0 && !stopped) {
                Thread.sleep(p.lingerMs);
            }
        } finally {
            if (watcher != null) {
                watcher.interrupt();
            }
            try {
                finishRunningConsumes(consumer, 5000);
            } finally {
                Common.shutdownQuietly(consumer::shutdown, 10000);
            }
        }
        boolean ok = p.count <= 0 || consumed.get() >= p.count;
        if (!reached) {
            for (String line : Common.clientLogWarnings(40)) {
                System.err.println("client log: " + line);
            }
            out.event("error").put("class", "HarnessTimeout")
                .put("message", "consumed " + consumed.get() + " of " + p.count + " within " + p.timeoutMs + " ms")
                .emit();
        }
        out.event("done").put("command", "consume-push").put("ok", ok).put("consumed", consumed.get())
            .put("deliveries", deliveries.get()).put("distinct", distinct.size()).put("timedOut", !reached && !stopped)
            .put("stopped", stopped)
            .put("elapsedMs", System.currentTimeMillis() - start).emit();
        return ok ? 0 : 1;
    }

    /**
     * Lets the consumes already running finish before shutdown() commits the offsets. The listener counts a
     * message (and may end the run) before it returns; the client records the message's offset after that,
     * in processConsumeResult on the same consume thread. shutdown() stops the consume pool without waiting
     * (awaitTerminationMillisWhenShutdown 0: shutdownNow) and then commits the recorded offsets
     * (persistConsumerOffset), so a thread still between its countDown and processConsumeResult had its
     * offset left out for good: under load the broker kept 0,0,0 or 0,1,1 for three consumed messages
     * (consumerProgress Diff 3 / Diff 1 in test_mqadmin_commands[5.3.3]). Queued consumes are dropped
     * first, as shutdownNow drops them: only the running ones are waited for. Concurrent consumption only
     * (an orderly consume keeps going through its queue while it holds the lock).
     */
    private static void finishRunningConsumes(DefaultMQPushConsumer consumer, long maxMs) {
        Object service = consumer.getDefaultMQPushConsumerImpl().getConsumeMessageService();
        if (!(service instanceof ConsumeMessageConcurrentlyService)) {
            return;
        }
        try {
            java.lang.reflect.Field f = ConsumeMessageConcurrentlyService.class.getDeclaredField("consumeExecutor");
            f.setAccessible(true);
            ThreadPoolExecutor pool = (ThreadPoolExecutor) f.get(service);
            pool.getQueue().clear();
            pool.shutdown();
            pool.awaitTermination(maxMs, TimeUnit.MILLISECONDS);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("client without ConsumeMessageConcurrentlyService.consumeExecutor", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Blocks the calling thread until the JVM halts. */
    private static void parkForever() {
        while (true) {
            try {
                Thread.sleep(Long.MAX_VALUE);
            } catch (InterruptedException e) {
                // shutdown interrupts the consume threads: keep holding the message
            }
        }
    }

    /** Emits "assigned" whenever the set of queues this member's rebalance holds changes. */
    private static Thread assignmentWatcher(DefaultMQPushConsumer consumer, String topic, Out out) {
        Thread t = new Thread(() -> {
            String last = null;
            while (!Thread.currentThread().isInterrupted()) {
                try {
                    Set<MessageQueue> held = consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl()
                        .getProcessQueueTable().keySet();
                    List<String> queues = new ArrayList<>();
                    List<Integer> queueIds = new ArrayList<>();
                    for (MessageQueue mq : held) {
                        queues.add(mq.getTopic() + ":" + mq.getBrokerName() + ":" + mq.getQueueId());
                        if (mq.getTopic().equals(topic)) {
                            queueIds.add(mq.getQueueId());
                        }
                    }
                    Collections.sort(queues);
                    Collections.sort(queueIds);
                    String now = String.join(",", queues);
                    if (!now.equals(last)) {
                        out.event("assigned").put("topic", topic).put("queueIds", queueIds).put("queues", queues)
                            .emit();
                        last = now;
                    }
                    Thread.sleep(50);
                } catch (InterruptedException e) {
                    return;
                } catch (RuntimeException e) {
                    // table not there yet (starting) or gone (shutting down): look again
                    try {
                        Thread.sleep(50);
                    } catch (InterruptedException ie) {
                        return;
                    }
                }
            }
        }, "harness-assignment");
        t.setDaemon(true);
        t.start();
        return t;
    }

    private static void countSuccess(List<MessageExt> msgs, Set<String> distinct, AtomicInteger consumed,
        CountDownLatch enough) {
        for (MessageExt m : msgs) {
            distinct.add(m.getMsgId());
            consumed.incrementAndGet();
            enough.countDown();
        }
    }
}
