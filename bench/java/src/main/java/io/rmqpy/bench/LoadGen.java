package io.rmqpy.bench;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.LongAdder;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;

/**
 * Load generator for bench/broker_bench.py: the official RocketMQ Java client
 * (DefaultMQProducer / DefaultMQPushConsumer), printing only totals, one JSON
 * line on stdout at the end (nothing per message).
 *
 * <pre>
 * LoadGen produce -n NAMESRV -t TOPIC [--mode sync|async|oneway] [--batch 1] [--threads 16] [--window 256]
 *                 [--body-size 128] [--warmup 3] [--seconds 20]
 * LoadGen consume -n NAMESRV -t TOPIC -g GROUP [--expect N] [--seconds 20] [--idle-ms 3000]
 * </pre>
 *
 * produce: sends for warmup+seconds; only sends that start and finish inside the
 * measured window (after the warm-up) count. sync: T threads share one producer,
 * each with one send in flight (like the official benchmark Producer). async: at
 * most W sends in flight. oneway: T threads calling sendOneway (TPS = calls handed over; the
 * consume phase tells how many were stored). --batch N (sync): each call sends a batch of N
 * messages (DefaultMQProducer.send(Collection)), TPS counts messages, RT is per call. Output: sent, failed, elapsedMs, tps, avgRtMs, maxRtMs, p99RtMs.
 *
 * consume: a push consumer from the first offset of a new group; counts messages
 * until --expect arrived, --seconds passed since the first one, or nothing came
 * for --idle-ms. Output: received, elapsedMs (first to last message), tps, firstMsgAfterMs.
 */
public final class LoadGen {
    private LoadGen() {
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length == 0) {
            System.err.println("usage: LoadGen produce|consume [options]; see the class comment");
            System.exit(2);
        }
        Map<String, String> a = parse(argv);
        String json;
        if ("produce".equals(argv[0])) {
            json = produce(a);
        } else if ("consume".equals(argv[0])) {
            json = consume(a);
        } else {
            System.err.println("unknown command " + argv[0]);
            System.exit(2);
            return;
        }
        System.out.println(json);
        System.out.flush();
        // the client's shutdown waits for idle threads; the work is done
        Runtime.getRuntime().halt(0);
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 1; i < argv.length; i++) {
            String k = argv[i];
            if (!k.startsWith("-") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("bad option " + k);
            }
            m.put(k.replaceFirst("^-+", ""), argv[++i]);
        }
        return m;
    }

    private static String opt(Map<String, String> a, String k, String dflt) {
        String v = a.get(k);
        if (v == null && dflt == null) {
            throw new IllegalArgumentException("missing --" + k);
        }
        return v == null ? dflt : v;
    }

    // ------------------------------------------------------------------ produce

    /** RT histogram: 10 us buckets up to 10 s, plus max and sum. */
    static final class Stats {
        static final int BUCKET_US = 10;
        final AtomicLongArray hist = new AtomicLongArray(1_000_000);
        /** messages acknowledged in the window (a batch counts its messages) */
        final LongAdder count = new LongAdder();
        /** send calls in the window: what RT is measured over */
        final LongAdder calls = new LongAdder();
        final LongAdder failed = new LongAdder();
        /** every SEND_OK, warm-up included: what a consumer of the topic will find */
        final LongAdder totalOk = new LongAdder();
        final LongAdder sumUs = new LongAdder();
        final AtomicLong maxUs = new AtomicLong();

        void ok(long us) {
            ok(us, 1);
        }

        void ok(long us, int messages) {
            count.add(messages);
            calls.increment();
            sumUs.add(us);
            hist.incrementAndGet((int) Math.min(hist.length() - 1, us / BUCKET_US));
            long m;
            while (us > (m = maxUs.get()) && !maxUs.compareAndSet(m, us)) {
                // retry
            }
        }

        double percentileMs(double p) {
            long n = calls.sum();
            long want = (long) Math.ceil(n * p);
            long seen = 0;
            for (int i = 0; i < hist.length(); i++) {
                seen += hist.get(i);
                if (seen >= want && n > 0) {
                    return (i + 1) * BUCKET_US / 1000.0;
                }
            }
            return 0;
        }
    }

    private static String produce(Map<String, String> a) throws Exception {
        final String namesrv = opt(a, "n", null);
        final String topic = opt(a, "t", null);
        final String mode = opt(a, "mode", "sync");
        final int threads = Integer.parseInt(opt(a, "threads", "16"));
        final int window = Integer.parseInt(opt(a, "window", "256"));
        final int bodySize = Integer.parseInt(opt(a, "body-size", "128"));
        final double warmup = Double.parseDouble(opt(a, "warmup", "3"));
        final double seconds = Double.parseDouble(opt(a, "seconds", "20"));
        final int batch = Integer.parseInt(opt(a, "batch", "1"));
        final boolean oneway = "oneway".equals(mode);

        final byte[] body = new byte[bodySize];
        Random rnd = new Random(42);
        for (int i = 0; i < bodySize; i++) {
            body[i] = (byte) ('a' + rnd.nextInt(26));
        }
        DefaultMQProducer producer = new DefaultMQProducer("bench_producer_" + System.nanoTime());
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("loadgen-" + ProcessHandle.current().pid());
        producer.setVipChannelEnabled(false);
        producer.setSendMsgTimeout(10000);
        producer.start();
        // learn the route (and create the topic) before the clock starts
        int stats0 = 0;
        for (int i = 0; ; i++) {
            try {
                producer.send(new Message(topic, body));
                stats0 = 1;
                break;
            } catch (Exception e) {
                if (i >= 30) {
                    throw e;
                }
                Thread.sleep(500);
            }
        }

        final Stats stats = new Stats();
        final long t0 = System.nanoTime();
        final long tStart = t0 + (long) (warmup * 1e9);
        final long tEnd = tStart + (long) (seconds * 1e9);
        final AtomicBoolean stop = new AtomicBoolean();

        if ("sync".equals(mode) || oneway) {
            Thread[] workers = new Thread[threads];
            for (int w = 0; w < threads; w++) {
                workers[w] = new Thread(() -> {
                    while (!stop.get()) {
                        long s = System.nanoTime();
                        if (s >= tEnd) {
                            break;
                        }
                        try {
                            if (oneway) {
                                // no answer: RT is the time the client takes to hand the request over
                                producer.sendOneway(new Message(topic, body));
                                long e = System.nanoTime();
                                stats.totalOk.increment();
                                if (s >= tStart && e <= tEnd) {
                                    stats.ok((e - s) / 1000);
                                }
                                continue;
                            }
                            SendResult r;
                            if (batch > 1) {
                                List<Message> msgs = new ArrayList<>(batch);
                                for (int b = 0; b < batch; b++) {
                                    msgs.add(new Message(topic, body));
                                }
                                r = producer.send(msgs);
                            } else {
                                r = producer.send(new Message(topic, body));
                            }
                            long e = System.nanoTime();
                            if (r.getSendStatus() == SendStatus.SEND_OK) {
                                stats.totalOk.add(batch);
                            }
                            if (s >= tStart && e <= tEnd) {
                                if (r.getSendStatus() == SendStatus.SEND_OK) {
                                    stats.ok((e - s) / 1000, batch);
                                } else {
                                    stats.failed.increment();
                                }
                            }
                        } catch (Exception ex) {
                            if (s >= tStart) {
                                stats.failed.increment();
                            }
                        }
                    }
                }, "loadgen-" + w);
                workers[w].start();
            }
            for (Thread w : workers) {
                w.join();
            }
        } else if ("async".equals(mode)) {
            final Semaphore inFlight = new Semaphore(window);
            while (true) {
                inFlight.acquire();
                final long s = System.nanoTime();
                if (s >= tEnd) {
                    inFlight.release();
                    break;
                }
                try {
                    producer.send(new Message(topic, body), new SendCallback() {
                        @Override
                        public void onSuccess(SendResult r) {
                            long e = System.nanoTime();
                            if (r.getSendStatus() == SendStatus.SEND_OK) {
                                stats.totalOk.increment();
                            }
                            if (s >= tStart && e <= tEnd) {
                                if (r.getSendStatus() == SendStatus.SEND_OK) {
                                    stats.ok((e - s) / 1000);
                                } else {
                                    stats.failed.increment();
                                }
                            }
                            inFlight.release();
                        }

                        @Override
                        public void onException(Throwable ex) {
                            if (s >= tStart) {
                                stats.failed.increment();
                            }
                            inFlight.release();
                        }
                    });
                } catch (Exception ex) {
                    if (s >= tStart) {
                        stats.failed.increment();
                    }
                    inFlight.release();
                }
            }
            inFlight.tryAcquire(window, 15, TimeUnit.SECONDS);
        } else {
            throw new IllegalArgumentException("--mode sync|async|oneway");
        }
        long n = stats.count.sum();
        double elapsedMs = (tEnd - tStart) / 1e6;
        return String.format(Locale.ROOT,
            "{\"event\":\"produce\",\"mode\":\"%s\",\"batch\":%d,\"threads\":%d,\"window\":%d,\"bodySize\":%d,"
                + "\"sent\":%d,\"failed\":%d,\"elapsedMs\":%.1f,\"tps\":%.1f,\"avgRtMs\":%.3f,"
                + "\"maxRtMs\":%.3f,\"p99RtMs\":%.3f,\"totalOk\":%d}",
            mode, batch, threads, window, bodySize, n, stats.failed.sum(), elapsedMs, n / (elapsedMs / 1000.0),
            stats.calls.sum() == 0 ? 0.0 : stats.sumUs.sum() / 1000.0 / stats.calls.sum(), stats.maxUs.get() / 1000.0, stats.percentileMs(0.99),
            stats.totalOk.sum() + stats0);
    }

    // ------------------------------------------------------------------ consume

    private static String consume(Map<String, String> a) throws Exception {
        final String namesrv = opt(a, "n", null);
        final String topic = opt(a, "t", null);
        final String group = opt(a, "g", "bench_consumer_" + System.nanoTime());
        final long expect = Long.parseLong(opt(a, "expect", String.valueOf(Long.MAX_VALUE)));
        final double seconds = Double.parseDouble(opt(a, "seconds", "20"));
        final long idleMs = Long.parseLong(opt(a, "idle-ms", "3000"));
        final long startWaitMs = Long.parseLong(opt(a, "start-wait-ms", "60000"));

        final LongAdder received = new LongAdder();
        final AtomicLong first = new AtomicLong();
        final AtomicLong last = new AtomicLong();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("loadgen-" + ProcessHandle.current().pid());
        consumer.setVipChannelEnabled(false);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            first.compareAndSet(0, now);
            received.add(msgs.size());
            last.set(now);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        final long t0 = System.nanoTime();
        consumer.start();
        while (true) {
            Thread.sleep(20);
            long now = System.nanoTime();
            long f = first.get();
            if (f == 0) {
                if (now - t0 > startWaitMs * 1_000_000L) {
                    break;
                }
                continue;
            }
            if (received.sum() >= expect || now - f > (long) (seconds * 1e9)
                || now - last.get() > idleMs * 1_000_000L) {
                break;
            }
        }
        long n = received.sum();
        long f = first.get();
        double elapsedMs = f == 0 ? 0 : (last.get() - f) / 1e6;
        return String.format(Locale.ROOT,
            "{\"event\":\"consume\",\"received\":%d,\"expect\":%d,\"elapsedMs\":%.1f,\"tps\":%.1f,"
                + "\"firstMsgAfterMs\":%.1f}",
            n, expect == Long.MAX_VALUE ? -1 : expect, elapsedMs, elapsedMs > 0 ? n / (elapsedMs / 1000.0) : 0.0,
            f == 0 ? -1.0 : (f - t0) / 1e6);
    }
}
