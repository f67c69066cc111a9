package io.rmqpy.interop.harness;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * transaction: a TransactionMQProducer sends COUNT half messages; the local transaction
 * answers --local (commit|rollback|unknown); checkLocalTransaction answers --check
 * (commit|rollback|unknown). With --count 0 it only answers check-backs.
 */
public final class TransactionCommand implements Command {
    @Override
    public String name() {
        return "transaction";
    }

    @Override
    public String usage() {
        return "transaction -n NAMESRV -t TOPIC [-g GROUP] [-c COUNT] [--local commit|rollback|unknown]\n"
            + "    [--check commit|rollback|unknown] [--wait-checks N] [--linger-ms MS] [--body TEMPLATE] [--tags T]\n"
            + "    + client options\n"
            + "  Emits sent (with localState), checked (one per check-back), then done once --wait-checks\n"
            + "  check-backs were answered (or --linger-ms passed). exit 1 if fewer checks arrived.";
    }

    private static LocalTransactionState state(String s) {
        switch (s) {
            case "commit":
                return LocalTransactionState.COMMIT_MESSAGE;
            case "rollback":
                return LocalTransactionState.ROLLBACK_MESSAGE;
            default:
                return LocalTransactionState.UNKNOW;
        }
    }

    @Override
    public Action prepare(Args a) {
        final Common.ClientOptions client = Common.ClientOptions.read(a);
        final String topic = a.required("topic");
        final String group = a.str("group", "harness_tx_producer");
        final int count = a.integer("count", 1);
        final LocalTransactionState local = state(a.choice("local", "commit", "commit", "rollback", "unknown"));
        final LocalTransactionState check = state(a.choice("check", "commit", "commit", "rollback", "unknown"));
        final int waitChecks = a.integer("wait-checks", 0);
        final long lingerMs = a.lng("linger-ms", 0);
        final String body = a.str("body", "tx-{i}");
        final String tags = a.str("tags", null);
        return out -> {
            final AtomicInteger checks = new AtomicInteger();
            TransactionMQProducer producer = new TransactionMQProducer(group);
            client.apply(producer);
            producer.setTransactionListener(new TransactionListener() {
                @Override
                public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                    return local;
                }

                @Override
                public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                    Map<String, Object> e = Common.messageFields(msg, 256);
                    e.put("answer", check.name());
                    e.put("transactionId", msg.getTransactionId());
                    out.event("checked").putAll(e).emit();
                    checks.incrementAndGet();
                    return check;
                }
            });
            producer.start();
            if (count == 0) {
                // only answering check-backs: learn the topic's brokers and heartbeat them now (5.x
                // producers do not route the default topic, so without a send no broker knows them)
                Object impl = producer.getDefaultMQProducerImpl();
                Object factory;
                try {
                    factory = Common.invoke(impl, "getMqClientFactory");
                } catch (Exception e) {
                    factory = Common.invoke(impl, "getmQClientFactory");
                }
                Common.invoke(factory, "updateTopicRouteInfoFromNameServer", topic);
                Common.invoke(factory, "sendHeartbeatToAllBrokerWithLock");
            }
            int failed = 0;
            try {
                for (int i = 0; i < count; i++) {
                    Message m = new Message(topic, tags, null, Common.expand(body, i, null).getBytes("UTF-8"));
                    try {
                        TransactionSendResult r = producer.sendMessageInTransaction(m, null);
                        Map<String, Object> e = ProduceCommand.sentFields(i, m, r, 256);
                        e.put("localState", r.getLocalTransactionState() == null ? null
                            : r.getLocalTransactionState().name());
                        out.event("sent").putAll(e).emit();
                    } catch (Exception ex) {
                        failed++;
                        out.event("error").put("i", i).putAll(Common.errorFields(ex)).emit();
                    }
                }
                long deadline = System.currentTimeMillis() + Math.max(lingerMs, 0);
                while (checks.get() < waitChecks && System.currentTimeMillis() < deadline) {
                    Common.sleep(100);
                }
                if (checks.get() >= waitChecks) {
                    Common.sleep(1500); // let the oneway END_TRANSACTION of the last check leave
                }
            } finally {
                Common.shutdownQuietly(producer::shutdown, 10000);
            }
            boolean ok = failed == 0 && checks.get() >= waitChecks;
            out.event("done").put("command", "transaction").put("ok", ok).put("checks", checks.get())
                .put("failed", failed).emit();
            return ok ? 0 : 1;
        };
    }
}
