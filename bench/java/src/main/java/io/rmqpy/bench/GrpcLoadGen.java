package io.rmqpy.bench;

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.LongAdder;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * Load generator of bench/grpc_bench.py: the official RocketMQ 5.x gRPC Java client
 * (rocketmq-client-java, shaded jar) against one gRPC endpoint, so that the servers, not a
 * Python client, bound the rates. One JSON line on stdout at the end, nothing per message.
 *
 * <pre>
 * GrpcLoadGen send    -e ENDPOINT -t TOPIC -n N [--inflight 256] [--body-size 128]
 * GrpcLoadGen receive -e ENDPOINT -t TOPIC -g GROUP -n N [--consumers 4] [--receives 8] [--batch 32]
 * </pre>
 *
 * send: one Producer, {@code sendAsync} with at most --inflight in flight; the clock starts after
 * a first synchronous send (route and connection). receive: --consumers SimpleConsumers, each with
 * --receives {@code receiveAsync(batch)} in flight, every message acked with {@code ackAsync}; the
 * clock runs from the first receive to the N-th completed ack. Output: n, secs, rate, p50/p99 of the
 * send (or receive call, and ack) in ms, failures, and this process's CPU seconds inside the window
 * (cpuSecs) and in all (cpuTotalSecs), so the bench can tell whether the generator bounds the rate.
 */
public final class GrpcLoadGen {
    private GrpcLoadGen() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            a.put(argv[i].replaceFirst("^-+", ""), argv[i + 1]);
        }
        String json = "send".equals(argv[0]) ? send(a) : receive(a);
        System.out.println(json);
        System.out.flush();
        Runtime.getRuntime().halt(0);  // the clients' shutdown waits for long polls; the work is done
    }

    private static String opt(Map<String, String> a, String k, String dflt) {
        String v = a.getOrDefault(k, dflt);
        if (v == null) {
            throw new IllegalArgumentException("missing --" + k);
        }
        return v;
    }

    /** The first few failures' text, printed with the totals (what kind of call failed, and why). */
    static final ConcurrentLinkedQueue<String> ERRORS = new ConcurrentLinkedQueue<>();

    private static void failure(String what, Throwable e) {
        if (ERRORS.size() < 5) {
            ERRORS.add(what + ": " + e);
        }
    }

    private static String errors() {
        StringBuilder sb = new StringBuilder("[");
        for (String e : ERRORS) {
            sb.append(sb.length() > 1 ? "," : "").append('"')
                .append(e.replace("\\", "\\\\").replace("\"", "\\\"").replace('\n', ' ')).append('"');
        }
        return sb.append(']').toString();
    }

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
    }

    private static ClientConfiguration config(String endpoint) {
        return ClientConfiguration.newBuilder().setEndpoints(endpoint).enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(10)).build();
    }

    /** Latencies in 10 us buckets up to 10 s. */
    static final class Hist {
        final AtomicLongArray buckets = new AtomicLongArray(1_000_000);
        final LongAdder n = new LongAdder();

        void add(long nanos) {
            buckets.incrementAndGet((int) Math.min(buckets.length() - 1, nanos / 10_000));
            n.increment();
        }

        double ms(double p) {
            long want = (long) Math.ceil(n.sum() * p);
            long seen = 0;
            for (int i = 0; i < buckets.length() && want > 0; i++) {
                seen += buckets.get(i);
                if (seen >= want) {
                    return (i + 1) / 100.0;
                }
            }
            return 0;
        }
    }

    private static String send(Map<String, String> a) throws Exception {
        String topic = opt(a, "t", null);
        int n = Integer.parseInt(opt(a, "n", null));
        int inflight = Integer.parseInt(opt(a, "inflight", "256"));
        byte[] body = new byte[Integer.parseInt(opt(a, "body-size", "128"))];
        java.util.Arrays.fill(body, (byte) 'x');
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        Producer producer = provider.newProducerBuilder().setClientConfiguration(config(opt(a, "e", null)))
            .setTopics(topic).build();
        Message m = provider.newMessageBuilder().setTopic(topic).setTag("TagA").setBody(body).build();
        producer.send(m);  // route and connection before the clock
        Hist rt = new Hist();
        LongAdder failed = new LongAdder();
        Semaphore window = new Semaphore(inflight);
        CountDownLatch done = new CountDownLatch(n);
        long cpu0 = cpuNanos();
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            window.acquire();
            long s = System.nanoTime();
            producer.sendAsync(m).whenComplete((r, e) -> {
                rt.add(System.nanoTime() - s);
                if (e != null) {
                    failed.increment();
                    failure("send", e);
                }
                window.release();
                done.countDown();
            });
        }
        done.await();
        double secs = (System.nanoTime() - t0) / 1e9;
        double cpu = (cpuNanos() - cpu0) / 1e9;
        return String.format(Locale.ROOT, "{\"mode\":\"send\",\"n\":%d,\"secs\":%.4f,\"rate\":%.1f,\"p50Ms\":%.2f,"
            + "\"p99Ms\":%.2f,\"failed\":%d,\"cpuSecs\":%.3f,\"cpuTotalSecs\":%.3f,\"errors\":%s}", n, secs, n / secs,
            rt.ms(0.5), rt.ms(0.99), failed.sum(), cpu, cpuNanos() / 1e9, errors());
    }

    private static String receive(Map<String, String> a) throws Exception {
        String endpoint = opt(a, "e", null);
        String topic = opt(a, "t", null);
        String group = opt(a, "g", null);
        int n = Integer.parseInt(opt(a, "n", null));
        int consumers = Integer.parseInt(opt(a, "consumers", "4"));
        int receives = Integer.parseInt(opt(a, "receives", "8"));
        int batch = Integer.parseInt(opt(a, "batch", "32"));
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        SimpleConsumer[] cs = new SimpleConsumer[consumers];
        for (int i = 0; i < consumers; i++) {
            cs[i] = provider.newSimpleConsumerBuilder().setClientConfiguration(config(endpoint))
                .setConsumerGroup(group).setAwaitDuration(Duration.ofSeconds(5))
                .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL)).build();
        }
        Thread.sleep(1000);  // the settings go over the telemetry stream after start-up
        Hist receiveRt = new Hist();
        Hist ackRt = new Hist();
        LongAdder failed = new LongAdder();
        AtomicLong acked = new AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        CountDownLatch done = new CountDownLatch(1);
        long cpu0 = cpuNanos();
        long t0 = System.nanoTime();
        for (SimpleConsumer c : cs) {
            for (int r = 0; r < receives; r++) {
                loop(c, batch, n, receiveRt, ackRt, failed, acked, stop, done);
            }
        }
        boolean all = done.await(120, TimeUnit.SECONDS);
        double secs = (System.nanoTime() - t0) / 1e9;
        double cpu = (cpuNanos() - cpu0) / 1e9;
        stop.set(true);
        long got = acked.get();
        return String.format(Locale.ROOT, "{\"mode\":\"receive\",\"n\":%d,\"complete\":%b,\"secs\":%.4f,"
            + "\"rate\":%.1f,\"p50Ms\":%.2f,\"p99Ms\":%.2f,\"ackP99Ms\":%.2f,\"failed\":%d,\"cpuSecs\":%.3f,"
            + "\"cpuTotalSecs\":%.3f,\"errors\":%s}", got, all, secs, got / secs, receiveRt.ms(0.5), receiveRt.ms(0.99),
            ackRt.ms(0.99), failed.sum(), cpu, cpuNanos() / 1e9, errors());
    }

    /** One receive in flight on {@code c}: receive, ack every message, receive again until done. */
    private static void loop(SimpleConsumer c, int batch, int n, Hist receiveRt, Hist ackRt, LongAdder failed,
                             AtomicLong acked, AtomicBoolean stop, CountDownLatch done) {
        if (stop.get()) {
            return;
        }
        long s = System.nanoTime();
        c.receiveAsync(batch, Duration.ofSeconds(30)).whenComplete((List<MessageView> msgs, Throwable e) -> {
            if (e != null) {  // counted, and retried a little later rather than at once
                failed.increment();
                failure("receive", e);
                CompletableFuture.runAsync(() -> loop(c, batch, n, receiveRt, ackRt, failed, acked, stop, done),
                    CompletableFuture.delayedExecutor(100, TimeUnit.MILLISECONDS));
                return;
            }
            if (!msgs.isEmpty()) {
                receiveRt.add(System.nanoTime() - s);
                for (MessageView mv : msgs) {
                    long as = System.nanoTime();
                    c.ackAsync(mv).whenComplete((v, ae) -> {
                        ackRt.add(System.nanoTime() - as);
                        if (ae != null) {
                            failed.increment();
                            failure("ack", ae);
                        } else if (acked.incrementAndGet() == n) {
                            stop.set(true);
                            done.countDown();
                        }
                    });
                }
            }
            loop(c, batch, n, receiveRt, ackRt, failed, acked, stop, done);
        });
    }
}
