package io.rmqpy.interop.harness;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/** consume-lite: DefaultLitePullConsumer in subscribe or assign mode. */
public final class ConsumeLiteCommand implements Command {
    @Override
    public String name() {
        return "consume-lite";
    }

    @Override
    public String usage() {
        return "consume-lite -n NAMESRV -t TOPIC -g GROUP [--mode subscribe|assign] [-c COUNT] [--timeout-ms 30000]\n"
            + "    [--tags EXPR | --sql EXPR] [--queue-ids 0,1,...] (assign; default all) [--broker-name B] (assign)\n"
            + "    [--seek begin|end|OFFSET] (assign) [--from first|last|timestamp:yyyyMMddHHmmss] [--broadcast]\n"
            + "    [--commit auto|sync|none] [--poll-timeout-ms 1000] [--pull-batch N] [--linger-ms 0]\n"
            + "    [--max-body-print 1024] + client options\n"
            + "  Emits started (with the assigned queues), received (one per polled message), then done;\n"
            + "  exit 1 if fewer than COUNT messages arrived (COUNT 0 = poll until the timeout).";
    }

    @Override
    public Action prepare(Args a) {
        final Common.ClientOptions client = Common.ClientOptions.read(a);
        final P p = new P();
        p.readShared(a);
        p.mode = a.choice("mode", "subscribe", "subscribe", "assign");
        p.queueIds = a.intList("queue-ids");
        p.brokerName = a.str("broker-name", null);
        p.seek = a.str("seek", null);
        p.commit = a.choice("commit", "auto", "auto", "sync", "none");
        p.pollTimeoutMs = a.lng("poll-timeout-ms", 1000);
        if (p.mode.equals("subscribe") && (p.queueIds != null || p.seek != null || p.brokerName != null)) {
            throw new Args.UsageException("--queue-ids/--seek/--broker-name need --mode assign");
        }
        return out -> run(client, p, out);
    }

    static final class P extends ConsumeOptions {
        String mode;
        List<Integer> queueIds;
        String brokerName;
        String seek;
        String commit;
        long pollTimeoutMs;
    }

    private int run(Common.ClientOptions client, P p, Out out) throws Exception {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(p.group, client.rpcHook());
        client.apply(c);
        p.applyStart(c, c::setConsumeFromWhere, c::setConsumeTimestamp);
        c.setAutoCommit(p.commit.equals("auto"));
        c.setPollTimeoutMillis(p.pollTimeoutMs);
        if (p.pullBatch > 0) {
            c.setPullBatchSize(p.pullBatch);
        }
        long start = System.currentTimeMillis();
        List<MessageQueue> assigned = new ArrayList<>();
        int received = 0;
        Set<String> distinct = ConcurrentHashMap.newKeySet();
        boolean reached = p.count <= 0;
        try {
            if (p.mode.equals("subscribe")) {
                if (p.sql != null) {
                    c.subscribe(p.topic, MessageSelector.bySql(p.sql));
                } else {
                    c.subscribe(p.topic, p.tags);
                }
                c.start();
            } else {
                c.start();
                Collection<MessageQueue> all = c.fetchMessageQueues(p.topic);
                for (MessageQueue mq : all) {
                    if ((p.queueIds == null || p.queueIds.contains(mq.getQueueId()))
                        && (p.brokerName == null || p.brokerName.equals(mq.getBrokerName()))) {
                        assigned.add(mq);
                    }
                }
                assigned.sort(null);
                if (!"*".equals(p.tags) && p.sql == null) {
                    c.setSubExpressionForAssign(p.topic, p.tags);
                }
                c.assign(assigned);
                if (p.seek != null) {
                    for (MessageQueue mq : assigned) {
                        if (p.seek.equals("begin")) {
                            c.seekToBegin(mq);
                        } else if (p.seek.equals("end")) {
                            c.seekToEnd(mq);
                        } else {
                            c.seek(mq, Long.parseLong(p.seek));
                        }
                    }
                }
            }
            out.event("started").put("command", "consume-lite").put("mode", p.mode).put("group", p.group)
                .put("topic", p.topic).put("assigned", assigned).put("clientId", c.buildMQClientId()).emit();
            long deadline = start + p.timeoutMs;
            long lingerUntil = -1;
            while (true) {
                long now = System.currentTimeMillis();
                if (lingerUntil < 0 && (now >= deadline || (p.count > 0 && received >= p.count))) {
                    reached = p.count <= 0 || received >= p.count;
                    if (!reached || p.lingerMs <= 0) {
                        break;
                    }
                    lingerUntil = now + p.lingerMs;
                }
                if (lingerUntil >= 0 && now >= lingerUntil) {
                    break;
                }
                List<MessageExt> msgs = c.poll(p.pollTimeoutMs);
                for (MessageExt m : msgs) {
                    received++;
                    distinct.add(m.getMsgId());
                    out.event("received").putAll(Common.messageFields(m, p.maxBodyPrint)).put("result", "POLLED")
                        .emit();
                }
                if (!msgs.isEmpty() && p.commit.equals("sync")) {
                    c.commitSync();
                }
            }
        } finally {
            Common.shutdownQuietly(c::shutdown, 10000);
        }
        boolean ok = p.count <= 0 || received >= p.count;
        if (!ok) {
            out.event("error").put("class", "HarnessTimeout")
                .put("message", "received " + received + " of " + p.count + " within " + p.timeoutMs + " ms").emit();
        }
        out.event("done").put("command", "consume-lite").put("ok", ok).put("received", received)
            .put("distinct", distinct.size()).put("timedOut", !ok)
            .put("elapsedMs", System.currentTimeMillis() - start).emit();
        return ok ? 0 : 1;
    }
}
