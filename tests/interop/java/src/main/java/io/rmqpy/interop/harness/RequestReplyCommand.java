package io.rmqpy.interop.harness;

import java.nio.charset.StandardCharsets;
import java.util.Map;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.RequestCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * request-reply: DefaultMQProducer.request(msg, timeout) COUNT times; unless --replier false,
 * a push consumer in the same JVM answers each request with MessageUtil.createReplyMessage.
 *
 * --linger-ms keeps the replier running after the last request until it has answered COUNT
 * requests (or the time is up), so what the replier saw can be reported even when request()
 * returned early. --reply-after-requester-shutdown true holds every reply until the requester
 * has been shut down (its channel gone from the broker): the reply then has no waiting requester.
 */
public final class RequestReplyCommand implements Command {
    @Override
    public String name() {
        return "request-reply";
    }

    @Override
    public String usage() {
        return "request-reply -n NAMESRV -t TOPIC [-g GROUP] [-c COUNT] [--replier true|false]\n"
            + "    [--request-timeout-ms 10000] [--warmup-ms MS] [--api sync|async] [--linger-ms MS]\n"
            + "    [--reply-after-requester-shutdown true|false] + client options\n"
            + "  Emits replied (reply body/properties, per request) or error (e.g. RequestTimeoutException),\n"
            + "  replier-received (the request as the replier got it), replier-sent (the replier's send\n"
            + "  result) or replier-error, requester-shutdown, then done.";
    }

    @Override
    public Action prepare(Args a) {
        final Common.ClientOptions client = Common.ClientOptions.read(a);
        final String topic = a.required("topic");
        final String group = a.str("group", "harness_rr");
        final int count = a.integer("count", 1);
        final boolean replier = a.bool("replier", true);
        final long timeoutMs = a.lng("request-timeout-ms", 10000);
        final long warmupMs = a.lng("warmup-ms", 0);
        final boolean async = a.choice("api", "sync", "sync", "async").equals("async");
        final long lingerMs = a.lng("linger-ms", 0);
        final boolean replyAfterShutdown = a.bool("reply-after-requester-shutdown", false);
        return out -> {
            // counted down once the requester is shut down (--reply-after-requester-shutdown)
            final java.util.concurrent.CountDownLatch requesterGone = new java.util.concurrent.CountDownLatch(1);
            // counted down by every answered (or failed) reply, for --linger-ms
            final java.util.concurrent.Semaphore answered = new java.util.concurrent.Semaphore(0);
            boolean requesterDown = false;
            DefaultMQProducer replyProducer = null;
            DefaultMQPushConsumer consumer = null;
            DefaultMQProducer requester = new DefaultMQProducer(group + "_requester");
            client.apply(requester);
            requester.setInstanceName("rr-requester-" + ProcessHandle.current().pid());
            int ok = 0;
            try {
                requester.start();
                if (replier) {
                    final DefaultMQProducer rp = new DefaultMQProducer(group + "_replier");
                    client.apply(rp);
                    rp.setInstanceName("rr-replier-" + ProcessHandle.current().pid());
                    rp.start();
                    replyProducer = rp;
                    consumer = new DefaultMQPushConsumer(group + "_consumer");
                    client.apply(consumer);
                    consumer.setInstanceName("rr-replier-" + ProcessHandle.current().pid());
                    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
                    consumer.subscribe(topic, "*");
                    consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                        for (MessageExt m : msgs) {
                            String requestBody = new String(m.getBody(), StandardCharsets.UTF_8);
                            out.event("replier-received").put("body", requestBody).put("topic", m.getTopic())
                                .put("properties", m.getProperties() == null ? null
                                    : new java.util.TreeMap<>(m.getProperties())).emit();
                            try {
                                if (replyAfterShutdown) {
                                    requesterGone.await(timeoutMs + 30000, java.util.concurrent.TimeUnit.MILLISECONDS);
                                }
                                byte[] body = ("reply-to-" + requestBody).getBytes(StandardCharsets.UTF_8);
                                Message reply = MessageUtil.createReplyMessage(m, body);
                                long t0 = System.currentTimeMillis();
                                try {
                                    SendResult r = rp.send(reply, 3000);
                                    out.event("replier-sent").put("status", r.getSendStatus().name())
                                        .put("topic", reply.getTopic()).put("msgId", r.getMsgId())
                                        .put("requestBody", requestBody)
                                        .put("properties", new java.util.TreeMap<>(reply.getProperties())).emit();
                                } catch (Exception e) {
                                    out.event("replier-error").put("requestBody", requestBody)
                                        .put("topic", reply.getTopic())
                                        .put("elapsedMs", System.currentTimeMillis() - t0)
                                        .putAll(Common.errorFields(e)).emit();
                                }
                            } catch (Exception e) {
                                out.event("replier-error").put("requestBody", requestBody)
                                    .putAll(Common.errorFields(e)).emit();
                            } finally {
                                answered.release();
                            }
                        }
                        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                    });
                    consumer.start();
                }
                if (warmupMs > 0) {
                    Common.sleep(warmupMs);
                }
                for (int i = 0; i < count; i++) {
                    Message m = new Message(topic, null, null, ("request-" + i).getBytes(StandardCharsets.UTF_8));
                    long t0 = System.currentTimeMillis();
                    try {
                        Message reply;
                        if (async) {
                            // request(msg, RequestCallback, timeout): the reply or the timeout arrive in the
                            // callback. Every call of the callback is reported (a "callback" event); the first
                            // non-null reply or exception ends the wait (the 4.9.8 and 5.3.3 clients both call
                            // onSuccess(null) once the request is sent, before the reply).
                            final java.util.concurrent.CompletableFuture<Message> f =
                                new java.util.concurrent.CompletableFuture<>();
                            final int reqNo = i;
                            final long began = t0;
                            requester.request(m, new RequestCallback() {
                                @Override
                                public void onSuccess(Message message) {
                                    out.event("callback").put("i", reqNo).put("kind", "onSuccess")
                                        .put("nullMessage", message == null)
                                        .put("elapsedMs", System.currentTimeMillis() - began).emit();
                                    if (message != null) {
                                        f.complete(message);
                                    }
                                }

                                @Override
                                public void onException(Throwable e) {
                                    out.event("callback").put("i", reqNo).put("kind", "onException")
                                        .put("class", e == null ? null : e.getClass().getName())
                                        .put("elapsedMs", System.currentTimeMillis() - began).emit();
                                    f.completeExceptionally(e);
                                }
                            }, timeoutMs);
                            try {
                                reply = f.get(timeoutMs + 10000, java.util.concurrent.TimeUnit.MILLISECONDS);
                            } catch (java.util.concurrent.ExecutionException ee) {
                                throw (Exception) ee.getCause();
                            }
                        } else {
                            reply = requester.request(m, timeoutMs);
                        }
                        Map<String, Object> e = new java.util.LinkedHashMap<>();
                        e.put("i", i);
                        e.put("topic", reply.getTopic());
                        Common.putBody(e, reply.getBody(), 256);
                        e.put("properties", reply.getProperties() == null ? null
                            : new java.util.TreeMap<>(reply.getProperties()));
                        e.put("elapsedMs", System.currentTimeMillis() - t0);
                        out.event("replied").putAll(e).emit();
                        ok++;
                    } catch (Exception ex) {
                        out.event("error").put("i", i).put("elapsedMs", System.currentTimeMillis() - t0)
                            .putAll(Common.errorFields(ex)).emit();
                    }
                }
                if (replyAfterShutdown) {
                    Common.shutdownQuietly(requester::shutdown, 10000);
                    requesterDown = true;
                    out.event("requester-shutdown").emit();
                    requesterGone.countDown();
                }
                if (consumer != null && lingerMs > 0) {
                    answered.tryAcquire(count, lingerMs, java.util.concurrent.TimeUnit.MILLISECONDS);
                }
            } finally {
                requesterGone.countDown();
                if (consumer != null) {
                    Common.shutdownQuietly(consumer::shutdown, 10000);
                }
                if (replyProducer != null) {
                    Common.shutdownQuietly(replyProducer::shutdown, 10000);
                }
                if (!requesterDown) {
                    Common.shutdownQuietly(requester::shutdown, 10000);
                }
            }
            boolean success = ok == count;
            out.event("done").put("command", "request-reply").put("ok", success).put("replied", ok).emit();
            return success ? 0 : 1;
        };
    }
}
