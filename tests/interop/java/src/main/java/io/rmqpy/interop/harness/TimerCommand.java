package io.rmqpy.interop.harness;

import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Map;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * timer: sends COUNT timer messages. 5.x: Message.setDeliverTimeMs / setDelayTimeMs /
 * setDelayTimeSec by reflection; on 4.9 (no such methods) the TIMER_* property is set directly.
 */
public final class TimerCommand implements Command {
    @Override
    public String name() {
        return "timer";
    }

    @Override
    public String usage() {
        return "timer -n NAMESRV -t TOPIC [-g GROUP] [-c COUNT] (--deliver-in-ms MS | --delay-ms MS | --delay-sec S)\n"
            + "    [--body TEMPLATE] + client options\n"
            + "  Emits sent (with deliverMs, api = method or property) or error, then done.";
    }

    @Override
    public Action prepare(Args a) {
        final Common.ClientOptions client = Common.ClientOptions.read(a);
        final String topic = a.required("topic");
        final String group = a.str("group", "harness_timer_producer");
        final int count = a.integer("count", 1);
        final long deliverIn = a.lng("deliver-in-ms", -1);
        final long delayMs = a.lng("delay-ms", -1);
        final long delaySec = a.lng("delay-sec", -1);
        final String body = a.str("body", "timer-{i}");
        return out -> {
            DefaultMQProducer producer = new DefaultMQProducer(group);
            client.apply(producer);
            producer.start();
            int ok = 0;
            try {
                for (int i = 0; i < count; i++) {
                    Message m = new Message(topic, null, null, Common.expand(body, i, null).getBytes(StandardCharsets.UTF_8));
                    long now = System.currentTimeMillis();
                    String api;
                    long deliverMs;
                    if (deliverIn >= 0) {
                        deliverMs = now + deliverIn;
                        api = set(m, "setDeliverTimeMs", "TIMER_DELIVER_MS", deliverMs);
                    } else if (delayMs >= 0) {
                        deliverMs = now + delayMs;
                        api = set(m, "setDelayTimeMs", "TIMER_DELAY_MS", delayMs);
                    } else {
                        deliverMs = now + delaySec * 1000;
                        api = set(m, "setDelayTimeSec", "TIMER_DELAY_SEC", delaySec);
                    }
                    try {
                        SendResult r = producer.send(m, 5000);
                        Map<String, Object> e = ProduceCommand.sentFields(i, m, r, 256);
                        e.put("deliverMs", deliverMs);
                        e.put("sentAtMs", now);
                        e.put("api", api);
                        out.event("sent").putAll(e).emit();
                        ok++;
                    } catch (Exception ex) {
                        out.event("error").put("i", i).put("api", api).putAll(Common.errorFields(ex)).emit();
                    }
                }
            } finally {
                Common.shutdownQuietly(producer::shutdown, 10000);
            }
            boolean success = ok == count;
            out.event("done").put("command", "timer").put("ok", success).put("sent", ok).emit();
            return success ? 0 : 1;
        };
    }

    private static String set(Message m, String method, String property, long value) throws Exception {
        try {
            Method setter = Message.class.getMethod(method, long.class);
            setter.invoke(m, value);
            return "method";
        } catch (NoSuchMethodException e) {
            m.putUserProperty(property, Long.toString(value));
            return "property";
        }
    }
}
