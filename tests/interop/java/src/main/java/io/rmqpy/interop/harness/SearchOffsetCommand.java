package io.rmqpy.interop.harness;

import java.util.ArrayList;
import java.util.List;

import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * search-offset: SEARCH_OFFSET_BY_TIMESTAMP through DefaultMQAdminExt, for each time and boundary
 * asked. "none" is searchOffset(mq, timestamp), which the 4.9.8 client sends without a boundaryType
 * and the 5.3.3 client with LOWER; "lower" / "upper" are 5.3.3's searchLowerBoundaryOffset /
 * searchUpperBoundaryOffset (called through reflection: the harness is compiled against 4.9.8).
 */
public final class SearchOffsetCommand implements Command {
    @Override
    public String name() {
        return "search-offset";
    }

    @Override
    public String usage() {
        return "search-offset -n NAMESRV -t TOPIC --broker-name B --queue-ids 0[,1..] --timestamps T1[,T2..]\n"
            + "    [--boundaries none[,lower,upper]] [--timeout-ms 5000] + client options\n"
            + "  Emits {\"event\":\"offset\",\"queueId\":..,\"timestamp\":..,\"boundary\":..,\"offset\":..} per question\n"
            + "  (an error event with the question's fields instead when the call throws), then done.";
    }

    @Override
    public Action prepare(Args a) {
        final Common.ClientOptions client = Common.ClientOptions.read(a);
        final String topic = a.required("topic");
        final String brokerName = a.required("broker-name");
        final List<Integer> queueIds = a.intList("queue-ids");
        final List<Long> timestamps = longs(a.required("timestamps"));
        final String[] boundaries = a.str("boundaries", "none").split(",");
        for (String b : boundaries) {
            if (!b.equals("none") && !b.equals("lower") && !b.equals("upper")) {
                throw new Args.UsageException("--boundaries takes none, lower, upper; got " + b);
            }
        }
        if (queueIds == null || queueIds.isEmpty()) {
            throw new Args.UsageException("missing required option --queue-ids");
        }
        final long timeoutMs = a.lng("timeout-ms", 5000);
        return out -> {
            long start = System.currentTimeMillis();
            DefaultMQAdminExt admin = AdminCommand.startAdmin(client, timeoutMs);
            int failed = 0;
            try {
                for (int queueId : queueIds) {
                    MessageQueue mq = new MessageQueue(topic, brokerName, queueId);
                    for (long ts : timestamps) {
                        for (String b : boundaries) {
                            try {
                                long offset = search(admin, mq, ts, b);
                                out.event("offset").put("queueId", queueId).put("timestamp", ts).put("boundary", b)
                                    .put("offset", offset).emit();
                            } catch (Exception e) {
                                failed++;
                                out.event("error").put("queueId", queueId).put("timestamp", ts).put("boundary", b)
                                    .putAll(Common.errorFields(e)).emit();
                            }
                        }
                    }
                }
            } finally {
                Common.shutdownQuietly(admin::shutdown, 10000);
            }
            out.event("done").put("command", name()).put("ok", failed == 0)
                .put("elapsedMs", System.currentTimeMillis() - start).emit();
            return failed == 0 ? 0 : 1;
        };
    }

    private static long search(DefaultMQAdminExt admin, MessageQueue mq, long ts, String boundary) throws Exception {
        switch (boundary) {
            case "lower":
                return (Long) Common.invoke(admin, "searchLowerBoundaryOffset", mq, ts);
            case "upper":
                return (Long) Common.invoke(admin, "searchUpperBoundaryOffset", mq, ts);
            default:
                return admin.searchOffset(mq, ts);
        }
    }

    private static List<Long> longs(String csv) {
        List<Long> out = new ArrayList<>();
        for (String p : csv.split(",")) {
            if (!p.trim().isEmpty()) {
                try {
                    out.add(Long.parseLong(p.trim()));
                } catch (NumberFormatException e) {
                    throw new Args.UsageException("--timestamps needs comma-separated integers, got " + csv);
                }
            }
        }
        return out;
    }
}
