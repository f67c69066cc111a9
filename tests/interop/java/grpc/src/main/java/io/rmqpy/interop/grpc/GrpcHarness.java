package io.rmqpy.interop.grpc;

import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientException;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionChecker;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * The official RocketMQ 5.x gRPC Java client (rocketmq-client-java) as a test driver.
 *
 * <pre>
 * GrpcHarness produce  --endpoint H:P --topic T -c N [--group G] [--delay-ms D] [--prefix P]
 * (every command: [--ssl default|true|false], default false; "default" leaves the client's own, TLS on)
 * GrpcHarness produce  --endpoint H:P --sends "T,N[,G[,P[,D]]];..."   (several runs, one producer)
 * GrpcHarness simple   --endpoint H:P --topic T --group G -c N --invisible-s S
 *                      [--no-ack B1,B2 [--hold-group true]] [--change B=S,...] [--batch M]
 *                      [--linger-s L] [--timeout-s T]
 * GrpcHarness push     --endpoint H:P --topic T --group G -c N [--threads K] [--consume-ms C] [--linger-s L] [--timeout-s T]
 * GrpcHarness transaction --endpoint H:P --topic T [--timeout-s T]
 * </pre>
 *
 * One JSON object per line on stdout ({@code sent}, {@code received}, {@code acked},
 * {@code changed}, {@code error}, {@code done}); everything the library prints goes to stderr.
 * Bodies are {@code PREFIX-i} (prefix default {@code msg}). In {@code simple}, the first delivery of
 * a body named by {@code --no-ack} is neither acked nor changed, the first delivery of a body named
 * by {@code --change B=S} gets changeInvisibleDuration(S seconds) instead of an ack; every other
 * delivery is acked; with {@code --hold-group true} the messages after a no-ack one in its batch and
 * message group are not acked either (a FIFO consumer that failed). {@code simple} and
 * {@code push} stop {@code --linger-s} after N messages were acked (consumed), to catch extra deliveries, and exit 1 if fewer came within {@code --timeout-s}.
 * Its listener takes {@code --consume-ms} per message (a consumption longer than the invisible time).
 */
public final class GrpcHarness {
    private static PrintStream out;

    private GrpcHarness() {
    }

    public static void main(String[] argv) throws Exception {
        out = System.out;
        System.setOut(System.err); // library console output must not corrupt the JSON lines
        if (argv.length < 1) {
            System.err.println("usage: GrpcHarness produce|simple|push --endpoint H:P ...");
            System.exit(2);
        }
        Map<String, String> opts = parse(Arrays.copyOfRange(argv, 1, argv.length));
        int rc;
        try {
            switch (argv[0]) {
                case "produce":
                    rc = produce(opts);
                    break;
                case "simple":
                    rc = simple(opts);
                    break;
                case "push":
                    rc = push(opts);
                    break;
                case "transaction":
                    rc = transaction(opts);
                    break;
                default:
                    System.err.println("unknown command " + argv[0]);
                    rc = 2;
            }
        } catch (Throwable t) {
            t.printStackTrace();
            emit(ev("error").put("message", String.valueOf(t)));
            rc = 1;
        }
        out.flush();
        // the client's shutdown leaves non-daemon threads behind for a while
        Runtime.getRuntime().halt(rc);
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("-") || i + 1 >= args.length) {
                throw new IllegalArgumentException("bad option " + args[i]);
            }
            opts.put(args[i].replaceFirst("^-+", ""), args[++i]);
        }
        return opts;
    }

    private static String need(Map<String, String> opts, String key) {
        String v = opts.get(key);
        if (v == null) {
            throw new IllegalArgumentException("--" + key + " is required");
        }
        return v;
    }

    /** {@code --ssl default} keeps the client's own default (TLS on); else {@code true|false} (default false). */
    private static ClientConfiguration config(Map<String, String> opts) {
        ClientConfigurationBuilder b = ClientConfiguration.newBuilder()
                .setEndpoints(need(opts, "endpoint"))
                .setRequestTimeout(Duration.ofSeconds(10));
        String ssl = opts.getOrDefault("ssl", "false");
        if (!"default".equals(ssl)) {
            b.enableSsl(Boolean.parseBoolean(ssl));
        }
        return b.build();
    }

    // ------------------------------------------------------------------ produce

    /** One run of sends: TOPIC,N[,GROUP[,PREFIX[,DELAY_MS]]]. */
    private static final class Spec {
        final String topic;
        final int n;
        final String group;
        final String prefix;
        final long delayMs;

        Spec(String text) {
            String[] f = text.split(",", -1);
            topic = f[0];
            n = Integer.parseInt(f[1]);
            group = f.length > 2 && !f[2].isEmpty() ? f[2] : null;
            prefix = f.length > 3 && !f[3].isEmpty() ? f[3] : "msg";
            delayMs = f.length > 4 && !f[4].isEmpty() ? Long.parseLong(f[4]) : 0;
        }
    }

    private static int produce(Map<String, String> opts) throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        List<Spec> specs = new ArrayList<>();
        if (opts.containsKey("sends")) {
            for (String text : opts.get("sends").split(";")) {
                specs.add(new Spec(text));
            }
        } else {
            specs.add(new Spec(String.join(",", need(opts, "topic"), need(opts, "c"),
                    opts.getOrDefault("group", ""), opts.getOrDefault("prefix", ""),
                    opts.getOrDefault("delay-ms", ""))));
        }
        String[] topics = specs.stream().map(sp -> sp.topic).distinct().toArray(String[]::new);
        try (Producer producer = provider.newProducerBuilder().setClientConfiguration(config(opts))
                .setTopics(topics).build()) {
            for (Spec sp : specs) {
                for (int i = 0; i < sp.n; i++) {
                    String body = sp.prefix + "-" + i;
                    MessageBuilder b = provider.newMessageBuilder().setTopic(sp.topic).setTag("TagA")
                            .setKeys("key-" + i).setBody(body.getBytes(StandardCharsets.UTF_8));
                    if (sp.group != null) {
                        b.setMessageGroup(sp.group);
                    }
                    long deliverAt = 0;
                    if (sp.delayMs > 0) {
                        deliverAt = System.currentTimeMillis() + sp.delayMs;
                        b.setDeliveryTimestamp(deliverAt);
                    }
                    Message m = b.build();
                    SendReceipt r = producer.send(m);
                    Ev e = ev("sent").put("topic", sp.topic).put("msgId", r.getMessageId().toString())
                            .put("body", body).put("at", System.currentTimeMillis());
                    if (deliverAt > 0) {
                        e.put("deliverAt", deliverAt);
                    }
                    emit(e);
                }
            }
        }
        emit(ev("done").put("ok", true));
        return 0;
    }

    // ------------------------------------------------------------------ consumers

    private static Ev received(MessageView mv) {
        Ev e = ev("received").put("msgId", mv.getMessageId().toString()).put("body", body(mv))
                .put("topic", mv.getTopic()).put("attempt", mv.getDeliveryAttempt())
                .put("at", System.currentTimeMillis()).put("born", mv.getBornTimestamp());
        mv.getMessageGroup().ifPresent(g -> e.put("group", g));
        mv.getDeliveryTimestamp().ifPresent(t -> e.put("deliverAt", t));
        return e;
    }

    private static String body(MessageView mv) {
        ByteBuffer buf = mv.getBody().duplicate();
        byte[] bytes = new byte[buf.remaining()];
        buf.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static Set<String> list(String v) {
        return v == null ? new HashSet<>() : new HashSet<>(Arrays.asList(v.split(",")));
    }

    private static int simple(Map<String, String> opts) throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        String topic = need(opts, "topic");
        int n = Integer.parseInt(need(opts, "c"));
        Duration invisible = Duration.ofSeconds(Long.parseLong(need(opts, "invisible-s")));
        int batch = Integer.parseInt(opts.getOrDefault("batch", "16"));
        long lingerMs = (long) (Double.parseDouble(opts.getOrDefault("linger-s", "0")) * 1000);
        long timeoutMs = (long) (Double.parseDouble(opts.getOrDefault("timeout-s", "60")) * 1000);
        Set<String> noAck = list(opts.get("no-ack"));
        // a FIFO consumer that failed a message does not go on with its message group
        boolean holdGroup = Boolean.parseBoolean(opts.getOrDefault("hold-group", "false"));
        Map<String, Duration> change = new HashMap<>();
        for (String spec : list(opts.get("change"))) {
            String[] kv = spec.split("=", 2);
            change.put(kv[0], Duration.ofSeconds(Long.parseLong(kv[1])));
        }
        Map<String, FilterExpression> sub = Collections.singletonMap(topic, FilterExpression.SUB_ALL);
        int acked = 0;
        long stopAt = Long.MAX_VALUE;
        try (SimpleConsumer consumer = provider.newSimpleConsumerBuilder().setClientConfiguration(config(opts))
                .setConsumerGroup(need(opts, "group")).setAwaitDuration(Duration.ofSeconds(5))
                .setSubscriptionExpressions(sub).build()) {
            // --timeout-s counts from here, as push's: building the consumer (its route and settings
            // fetches) took 30 s of a 60 s timeout once, with several harness JVMs starting at load 25
            long deadline = System.currentTimeMillis() + timeoutMs;
            emit(ev("started").put("at", System.currentTimeMillis()));
            while (System.currentTimeMillis() < Math.min(deadline, stopAt)) {
                List<MessageView> got;
                try {
                    got = consumer.receive(batch, invisible);
                } catch (ClientException | RuntimeException e) {  // 5.0.8 rethrows a gRPC status as is
                    // what a SimpleConsumer application does with a failed receive: note it and receive
                    // again; the tests allow it only for the reference server (a receive of the proxy
                    // under load missed its deadline), never for rmqpy's
                    emit(ev("receive-error").put("message", String.valueOf(e.getMessage()))
                            .put("at", System.currentTimeMillis()));
                    continue;
                }
                Set<String> held = new HashSet<>();
                for (MessageView mv : got) {
                    String b = body(mv);
                    String g = mv.getMessageGroup().orElse("");
                    emit(received(mv));
                    if (noAck.remove(b)) {
                        if (holdGroup) {
                            held.add(g);
                        }
                        continue;
                    }
                    if (held.contains(g)) {
                        emit(ev("held").put("msgId", mv.getMessageId().toString()).put("body", b));
                        continue;
                    }
                    Duration d = change.remove(b);
                    if (d != null) {
                        consumer.changeInvisibleDuration(mv, d);
                        emit(ev("changed").put("msgId", mv.getMessageId().toString()).put("body", b)
                                .put("seconds", d.getSeconds()).put("at", System.currentTimeMillis()));
                        continue;
                    }
                    consumer.ack(mv);
                    acked++;
                    emit(ev("acked").put("msgId", mv.getMessageId().toString()).put("body", b));
                }
                if (acked >= n && stopAt == Long.MAX_VALUE) {
                    stopAt = System.currentTimeMillis() + lingerMs;
                }
            }
        }
        emit(ev("done").put("ok", acked >= n).put("acked", acked).put("at", System.currentTimeMillis()));
        return acked >= n ? 0 : 1;
    }

    private static int push(Map<String, String> opts) throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        String topic = need(opts, "topic");
        int n = Integer.parseInt(need(opts, "c"));
        long lingerMs = (long) (Double.parseDouble(opts.getOrDefault("linger-s", "0")) * 1000);
        long timeoutMs = (long) (Double.parseDouble(opts.getOrDefault("timeout-s", "60")) * 1000);
        long consumeMs = Long.parseLong(opts.getOrDefault("consume-ms", "0"));
        Set<String> seen = ConcurrentHashMap.newKeySet();
        CountDownLatch all = new CountDownLatch(n);
        AtomicInteger consumed = new AtomicInteger();
        Map<String, FilterExpression> sub = Collections.singletonMap(topic, FilterExpression.SUB_ALL);
        PushConsumer consumer = provider.newPushConsumerBuilder().setClientConfiguration(config(opts))
                .setConsumerGroup(need(opts, "group")).setSubscriptionExpressions(sub)
                .setConsumptionThreadCount(Integer.parseInt(opts.getOrDefault("threads", "4")))
                .setMessageListener(mv -> {
                    emit(received(mv));
                    if (consumeMs > 0) {
                        try {
                            Thread.sleep(consumeMs);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                        emit(ev("consumed").put("body", body(mv))
                                .put("at", System.currentTimeMillis()));
                    }
                    consumed.incrementAndGet();
                    if (seen.add(mv.getMessageId().toString())) {
                        all.countDown();
                    }
                    return ConsumeResult.SUCCESS;
                }).build();
        emit(ev("started").put("at", System.currentTimeMillis()));
        boolean ok = all.await(timeoutMs, TimeUnit.MILLISECONDS);
        if (ok) {
            Thread.sleep(lingerMs);
        }
        emit(ev("done").put("ok", ok).put("consumed", consumed.get()).put("distinct", seen.size()));
        long t0 = System.currentTimeMillis();
        consumer.close();
        emit(ev("closed").put("ms", System.currentTimeMillis() - t0));
        return ok ? 0 : 1;
    }

    private static int transaction(Map<String, String> opts) throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        String topic = need(opts, "topic");
        long timeoutMs = (long) (Double.parseDouble(opts.getOrDefault("timeout-s", "60")) * 1000);
        CountDownLatch checked = new CountDownLatch(1);
        TransactionChecker checker = mv -> {
            String b = body(mv);
            emit(ev("checked").put("msgId", mv.getMessageId().toString()).put("body", b)
                    .put("at", System.currentTimeMillis()));
            if (b.equals("tx-check")) {
                checked.countDown();
            }
            // what the application decided: a check may also come for one it ended (Java's broker
            // checks a half message whose end it has not read yet)
            return b.equals("tx-rollback") ? TransactionResolution.ROLLBACK : TransactionResolution.COMMIT;
        };
        try (Producer producer = provider.newProducerBuilder().setClientConfiguration(config(opts))
                .setTopics(topic).setTransactionChecker(checker).build()) {
            for (String what : new String[] {"commit", "rollback", "check"}) {
                Transaction tx = producer.beginTransaction();
                Message m = provider.newMessageBuilder().setTopic(topic).setTag("TagA").setKeys("key-" + what)
                        .setBody(("tx-" + what).getBytes(StandardCharsets.UTF_8)).build();
                SendReceipt r = producer.send(m, tx);
                emit(ev("sent").put("topic", topic).put("msgId", r.getMessageId().toString())
                        .put("body", "tx-" + what).put("at", System.currentTimeMillis()));
                if (what.equals("commit")) {
                    tx.commit();
                } else if (what.equals("rollback")) {
                    tx.rollback();
                }
            }
            boolean ok = checked.await(timeoutMs, TimeUnit.MILLISECONDS);
            emit(ev("done").put("ok", ok));
            return ok ? 0 : 1;
        }
    }

    // ------------------------------------------------------------------ JSON lines

    static final class Ev {
        final Map<String, Object> fields = new LinkedHashMap<>();

        Ev put(String k, Object v) {
            fields.put(k, v);
            return this;
        }
    }

    private static Ev ev(String name) {
        return new Ev().put("event", name);
    }

    private static synchronized void emit(Ev e) {
        StringBuilder sb = new StringBuilder("{");
        List<String> parts = new ArrayList<>();
        for (Map.Entry<String, Object> f : e.fields.entrySet()) {
            Object v = f.getValue();
            String val = v instanceof Number || v instanceof Boolean ? String.valueOf(v) : quote(String.valueOf(v));
            parts.add(quote(f.getKey()) + ":" + val);
        }
        sb.append(String.join(",", parts)).append('}');
        out.println(sb);
        out.flush();
    }

    private static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }
}
