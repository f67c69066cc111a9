package io.rmqpy.interop.harness;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.store.OffsetStore;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.consumer.store.RemoteBrokerOffsetStore;
import org.apache.rocketmq.client.impl.MQClientManager;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The client's own RemoteBrokerOffsetStore, with a pause after each broker read of TOPIC's offsets
 * (READ_FROM_STORE, which sends QUERY_CONSUMER_OFFSET) until a file exists.
 *
 * <p>A push consumer of a new group asks the broker for the group's offset of a queue and, when told
 * QUERY_NOT_FOUND, then asks for the queue's max offset (RebalancePushImpl.computePullFromWhere).
 * Messages sent between the two requests are skipped. The pause holds that window open so a test can
 * send into it: deterministic instead of a race. Emits {@code offset-read} (queueId, offset: -1 = not
 * found) before each pause. A dynamic proxy, because OffsetStore has more methods in 5.x than in 4.9.</p>
 */
final class HeldOffsetStore {
    private HeldOffsetStore() {
    }

    static OffsetStore create(DefaultMQPushConsumer consumer, String topic, Path release, long timeoutMs, Out out) {
        final OffsetStore[] target = new OffsetStore[1];
        InvocationHandler handler = (proxy, method, args) -> {
            if (method.getDeclaringClass() == Object.class) {
                return method.invoke(target, args);
            }
            synchronized (target) {
                if (target[0] == null) {
                    // the consumer's start() made this client instance just before it loads the offset store
                    target[0] = new RemoteBrokerOffsetStore(
                        MQClientManager.getInstance().getOrCreateMQClientInstance(consumer), consumer.getConsumerGroup());
                }
            }
            Object result;
            try {
                result = method.invoke(target[0], args);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
            if (method.getName().equals("readOffset") && args.length == 2 && args[1] == ReadOffsetType.READ_FROM_STORE
                && ((MessageQueue) args[0]).getTopic().equals(topic)) {
                out.event("offset-read").put("queueId", ((MessageQueue) args[0]).getQueueId())
                    .put("offset", result).emit();
                long deadline = System.currentTimeMillis() + timeoutMs;
                while (!Files.exists(release) && System.currentTimeMillis() < deadline) {
                    Thread.sleep(20);
                }
            }
            return result;
        };
        return (OffsetStore) Proxy.newProxyInstance(OffsetStore.class.getClassLoader(),
            new Class<?>[] {OffsetStore.class}, handler);
    }
}
