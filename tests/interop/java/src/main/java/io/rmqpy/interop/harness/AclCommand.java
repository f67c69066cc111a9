package io.rmqpy.interop.harness;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;

import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * ACL probes: each probe is one request made by the official client as one of
 * the identities of --id (NAME=ACCESSKEY:SECRETKEY, with :none appended to
 * drop the Signature field; the identity "anon" sends no credentials), and
 * each emits one "probe" event: ok, or the broker's responseCode and remark.
 * Every identity has its own client instance (the RPC hook belongs to the
 * MQClientInstance), and one JVM runs a whole permission matrix.
 */
final class AclCommand implements Command {
    @Override
    public String name() {
        return "acl";
    }

    @Override
    public String usage() {
        return "acl -n NAMESRV --broker ADDR [--id NAME=AK:SK[:none]]...\n"
            + "    --probe NAME/send:TOPIC | NAME/pull:TOPIC:GROUP | NAME/create-topic:TOPIC ... + client options\n"
            + "  Emits one {\"event\":\"probe\",\"probe\":..,\"ok\":..,\"responseCode\":..} per probe, then done.";
    }

    /** One identity's clients, made on first use. */
    private static final class Identity {
        final String name;
        final Common.ClientOptions client;
        final RPCHook hook;
        DefaultMQProducer producer;
        DefaultMQAdminExt admin;
        final List<DefaultMQPullConsumer> pullers = new ArrayList<>();

        Identity(String name, Common.ClientOptions client, RPCHook hook) {
            this.name = name;
            this.client = client;
            this.hook = hook;
        }

        String instance(String what) {
            return "acl-" + name + "-" + what + "-" + ProcessHandle.current().pid();
        }

        void close() {
            if (producer != null) {
                Common.shutdownQuietly(producer::shutdown, 10000);
            }
            if (admin != null) {
                Common.shutdownQuietly(admin::shutdown, 10000);
            }
            for (DefaultMQPullConsumer c : pullers) {
                Common.shutdownQuietly(c::shutdown, 10000);
            }
        }
    }

    @Override
    public Action prepare(Args a) {
        final Common.ClientOptions client = Common.ClientOptions.read(a);
        final String broker = a.required("broker");
        final List<String> ids = a.all("id");
        final List<String> probes = a.all("probe");
        final long timeoutMs = a.lng("timeout-ms", 5000);
        if (probes.isEmpty()) {
            throw new Args.UsageException("at least one --probe");
        }
        final Map<String, Identity> identities = new LinkedHashMap<>();
        identities.put("anon", new Identity("anon", client, null));
        for (String id : ids) {
            int eq = id.indexOf('=');
            String[] cred = id.substring(eq + 1).split(":");
            if (eq < 1 || cred.length < 2) {
                throw new Args.UsageException("--id NAME=AK:SK[:none], got " + id);
            }
            final AclClientRPCHook acl = new AclClientRPCHook(new SessionCredentials(cred[0], cred[1]));
            RPCHook hook = acl;
            if (cred.length > 2 && cred[2].equals("none")) {
                hook = new RPCHook() {
                    @Override
                    public void doBeforeRequest(String remoteAddr, RemotingCommand request) {
                        acl.doBeforeRequest(remoteAddr, request);
                        request.getExtFields().remove(SessionCredentials.SIGNATURE);
                    }

                    @Override
                    public void doAfterResponse(String remoteAddr, RemotingCommand request, RemotingCommand response) {
                    }
                };
            }
            identities.put(id.substring(0, eq), new Identity(id.substring(0, eq), client, hook));
        }
        for (String probe : probes) {
            int slash = probe.indexOf('/');
            if (slash < 1 || !identities.containsKey(probe.substring(0, slash))) {
                throw new Args.UsageException("--probe NAME/OP:ARGS with a known NAME, got " + probe);
            }
        }
        return out -> run(identities, broker, probes, timeoutMs, out);
    }

    private int run(Map<String, Identity> identities, String broker, List<String> probes, long timeoutMs, Out out)
        throws Exception {
        try {
            for (String probe : probes) {
                int slash = probe.indexOf('/');
                Identity who = identities.get(probe.substring(0, slash));
                String[] parts = probe.substring(slash + 1).split(":");
                Out.Event e = out.event("probe").put("probe", probe);
                try {
                    switch (parts[0]) {
                        case "send": {
                            if (who.producer == null) {
                                who.producer = new DefaultMQProducer("acl_probe_" + who.name, who.hook);
                                who.client.apply(who.producer);
                                who.producer.setInstanceName(who.instance("p"));
                                who.producer.setRetryTimesWhenSendFailed(0);
                                who.producer.start();
                            }
                            SendResult r = who.producer.send(new Message(parts[1], "probe".getBytes()), timeoutMs);
                            e.put("status", r.getSendStatus().toString());
                            break;
                        }
                        case "pull": {
                            DefaultMQPullConsumer c = new DefaultMQPullConsumer(parts[2], who.hook);
                            who.client.apply(c);
                            c.setInstanceName(who.instance("c" + who.pullers.size()));
                            c.start();
                            who.pullers.add(c);
                            MessageQueue mq = new MessageQueue(parts[1], brokerName(c, parts[1]), 0);
                            PullResult r = c.pull(mq, "*", 0, 32, timeoutMs);
                            e.put("status", r.getPullStatus().toString())
                                .put("found", r.getMsgFoundList() == null ? 0 : r.getMsgFoundList().size());
                            break;
                        }
                        case "create-topic": {
                            if (who.admin == null) {
                                who.admin = new DefaultMQAdminExt(who.hook, timeoutMs);
                                who.client.apply(who.admin);
                                who.admin.setInstanceName(who.instance("a"));
                                who.admin.setAdminExtGroup("acl_probe_admin_" + who.name);
                                who.admin.start();
                            }
                            who.admin.createAndUpdateTopicConfig(broker, new TopicConfig(parts[1], 1, 1, 6));
                            break;
                        }
                        default:
                            throw new Args.UsageException("unknown probe " + probe);
                    }
                    e.put("ok", true);
                } catch (Args.UsageException u) {
                    throw u;
                } catch (Exception ex) {
                    e.put("ok", false).putAll(Common.errorFields(ex));
                }
                e.emit();
            }
        } finally {
            for (Identity who : identities.values()) {
                who.close();
            }
        }
        out.event("done").put("command", "acl").put("ok", true).emit();
        return 0;
    }

    /** The broker name of the topic's first queue, as the name server routes it. */
    private static String brokerName(DefaultMQPullConsumer c, String topic) throws Exception {
        for (MessageQueue mq : c.fetchSubscribeMessageQueues(topic)) {
            return mq.getBrokerName();
        }
        throw new IllegalStateException("no route for " + topic);
    }
}
