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
 */
public final class RequestReplyCommand implements Command {
    @Override
    public String name() {
        return "request-reply";
    }

    @Override
    public String usage() {
        return "request-reply -n NAMESRV -t TOPIC [-g GROUP] [-c COUNT] [--replier true|false]\n"
            + "    [--request-timeout-ms 10000] [--warmup-ms MS] [--api sync|async] + client options\n"
            + "  Emits replied (reply body/properties, per request) or error (e.g. RequestTimeoutException),\n"
            + "  replier-sent (the replier's send result), then done.";
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
        return out -> {
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
                            try {
                                byte[] body = ("reply-to-" + new String(m.getBody(), StandardCharsets.UTF_8))
                                    .getBytes(StandardCharsets.UTF_8);
                                Message reply = MessageUtil.createReplyMessage(m, body);
                                SendResult r = rp.send(reply, 3000);
                                out.event("replier-sent").put("status", r.getSendStatus().name())
                                    .put("topic", reply.getTopic()).put("msgId", r.getMsgId()).emit();
                            } catch (Exception e) {
                                out.event("replier-error").putAll(Common.errorFields(e)).emit();
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
                            // request(msg, RequestCallback, timeout): the reply or the timeout arrive in the callback
                            final java.util.concurrent.CompletableFuture<Message> f =
                                new java.util.concurrent.CompletableFuture<>();
                            requester.request(m, new RequestCallback() {
                                @Override
                                public void onSuccess(Message message) {
                                    f.complete(message);
                                }

                                @Override
                                public void onException(Throwable e) {
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
            } finally {
                if (consumer != null) {
                    Common.shutdownQuietly(consumer::shutdown, 10000);
                }
                if (replyProducer != null) {
                    Common.shutdownQuietly(replyProducer::shutdown, 10000);
                }
                Common.shutdownQuietly(requester::shutdown, 10000);
            }
            boolean success = ok == count;
            out.event("done").put("command", "request-reply").put("ok", success).put("replied", ok).emit();
            return success ? 0 : 1;
        };
    }
}
