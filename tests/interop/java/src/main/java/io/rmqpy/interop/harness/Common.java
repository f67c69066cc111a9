package io.rmqpy.interop.harness;

import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.zip.CRC32;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * Helpers shared by the subcommands. Nothing here may name a class that
 * moved between RocketMQ 4.9 and 5.x (everything under
 * org.apache.rocketmq.common.protocol in 4.9): such calls go through
 * reflection, see {@link #setEnumProperty}.
 */
public final class Common {
    private Common() {
    }

    /**
     * The last {@code max} WARN/ERROR lines of the client's own log file (rocketmq_client.log under
     * rocketmq.log.root, 5.x, or rocketmq.client.logRoot, 4.9), for a failure report: a consumer that
     * got nothing says there why (a rebalance that found no route or no member list, a heartbeat that
     * lost its lock, pull errors), and the file is gone with the test's scratch home afterwards.
     */
    public static List<String> clientLogWarnings(int max) {
        List<String> out = new ArrayList<>();
        for (String prop : new String[] {"rocketmq.log.root", "rocketmq.client.logRoot"}) {
            String root = System.getProperty(prop);
            if (root == null) {
                continue;
            }
            java.nio.file.Path log = java.nio.file.Paths.get(root, "rocketmq_client.log");
            try {
                for (String line : java.nio.file.Files.readAllLines(log, StandardCharsets.UTF_8)) {
                    if (line.contains(" WARN ") || line.contains(" ERROR ")) {
                        out.add(line.length() > 400 ? line.substring(0, 400) : line);
                    }
                }
                break;
            } catch (java.io.IOException e) {
                // not this generation's file: try the other property
            }
        }
        return out.subList(Math.max(0, out.size() - max), out.size());
    }

    /** Client options shared by every subcommand that builds a client. */
    public static final class ClientOptions {
        String namesrv;
        String instance;
        String clientIp;
        String unitName;
        boolean vipChannel;
        int pollNameServerMs;
        int heartbeatMs;
        int apiTimeoutMs;
        String accessKey;
        String secretKey;
        String securityToken;
        String sign;

        public static ClientOptions read(Args a) {
            ClientOptions o = new ClientOptions();
            o.namesrv = a.required("namesrv");
            o.instance = a.str("instance", null);
            o.clientIp = a.str("client-ip", null);
            o.unitName = a.str("unit-name", null);
            o.vipChannel = a.bool("vip-channel", false);
            o.pollNameServerMs = a.integer("poll-namesrv-ms", 0);
            o.heartbeatMs = a.integer("heartbeat-ms", 0);
            o.apiTimeoutMs = a.integer("api-timeout-ms", 0);
            o.accessKey = a.str("access-key", null);
            o.secretKey = a.str("secret-key", null);
            o.securityToken = a.str("security-token", null);
            o.sign = a.choice("sign", "hook", "hook", "none");
            long rebalanceMs = a.lng("rebalance-interval-ms", 0);
            if (rebalanceMs > 0) {
                // read once when RebalanceService loads, i.e. after this
                System.setProperty("rocketmq.client.rebalance.waitInterval", Long.toString(rebalanceMs));
            }
            return o;
        }

        /**
         * The official AclClientRPCHook when --access-key is given (null otherwise);
         * --sign none then drops its Signature field again (a request with a key but no signature).
         */
        public RPCHook rpcHook() {
            if (accessKey == null) {
                return null;
            }
            final AclClientRPCHook acl = new AclClientRPCHook(
                new SessionCredentials(accessKey, secretKey == null ? "" : secretKey, securityToken));
            if (sign.equals("hook")) {
                return acl;
            }
            return new RPCHook() {
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

        public void apply(ClientConfig c) {
            c.setNamesrvAddr(namesrv);
            c.setInstanceName(instance != null ? instance : "harness-" + ProcessHandle.current().pid());
            c.setVipChannelEnabled(vipChannel);
            if (clientIp != null) {
                c.setClientIP(clientIp);
            }
            if (unitName != null) {
                c.setUnitName(unitName);
            }
            if (pollNameServerMs > 0) {
                c.setPollNameServerInterval(pollNameServerMs);
            }
            if (heartbeatMs > 0) {
                c.setHeartbeatBrokerInterval(heartbeatMs);
            }
            if (apiTimeoutMs > 0) {
                c.setMqClientApiTimeout(apiTimeoutMs);
            }
        }
    }

    /** {@code {i}} -> index, {@code {run}} -> run id. */
    public static String expand(String template, int i, String runId) {
        if (template == null) {
            return null;
        }
        return template.replace("{i}", Integer.toString(i)).replace("{run}", runId == null ? "" : runId);
    }

    /**
     * Body of message i: the expanded template, then padded with a
     * deterministic ASCII pattern (or cut) to exactly {@code size} bytes when
     * size >= 0.
     */
    public static byte[] body(String template, int size, int i, String runId) {
        byte[] head = expand(template, i, runId).getBytes(StandardCharsets.UTF_8);
        if (size < 0 || size == head.length) {
            return head;
        }
        byte[] b = new byte[size];
        int n = Math.min(size, head.length);
        System.arraycopy(head, 0, b, 0, n);
        for (int k = n; k < size; k++) {
            b[k] = (byte) ('a' + ((k + i) % 26));
        }
        return b;
    }

    public static String crc32(byte[] b) {
        CRC32 c = new CRC32();
        c.update(b == null ? new byte[0] : b);
        return String.format("%08x", c.getValue());
    }

    /** Body fields for an event: body (text) or bodyBase64, bodyLen, bodyCrc32. */
    public static void putBody(Map<String, Object> m, byte[] body, int maxPrint) {
        if (body == null) {
            m.put("body", null);
            m.put("bodyLen", 0);
            return;
        }
        m.put("bodyLen", body.length);
        m.put("bodyCrc32", crc32(body));
        if (body.length <= maxPrint) {
            try {
                String s = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(body)).toString();
                m.put("body", s);
            } catch (CharacterCodingException e) {
                m.put("bodyBase64", Base64.getEncoder().encodeToString(body));
            }
        }
    }

    /** The "received" event fields of a consumed message. */
    public static Map<String, Object> messageFields(MessageExt m, int maxBodyPrint) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("topic", m.getTopic());
        e.put("tags", m.getTags());
        e.put("keys", m.getKeys());
        putBody(e, m.getBody(), maxBodyPrint);
        e.put("brokerName", m.getBrokerName());
        e.put("queueId", m.getQueueId());
        e.put("queueOffset", m.getQueueOffset());
        e.put("msgId", m.getMsgId());
        e.put("offsetMsgId", m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : null);
        e.put("reconsumeTimes", m.getReconsumeTimes());
        e.put("commitLogOffset", m.getCommitLogOffset());
        e.put("storeSize", m.getStoreSize());
        e.put("sysFlag", m.getSysFlag());
        e.put("flag", m.getFlag());
        e.put("bodyCRC", m.getBodyCRC());
        e.put("bornTimestamp", m.getBornTimestamp());
        e.put("storeTimestamp", m.getStoreTimestamp());
        e.put("bornHost", m.getBornHost());
        e.put("storeHost", m.getStoreHost());
        e.put("preparedTransactionOffset", m.getPreparedTransactionOffset());
        e.put("properties", m.getProperties() == null ? null : new TreeMap<>(m.getProperties()));
        return e;
    }

    /** Error event for any failure; prints RocketMQ response codes and the cause chain. */
    public static Map<String, Object> errorFields(Throwable t) {
        Map<String, Object> e = new LinkedHashMap<>();
        describe(e, t);
        List<Map<String, Object>> causes = new ArrayList<>();
        Throwable c = t.getCause();
        for (int depth = 0; c != null && c != t && depth < 8; depth++) {
            Map<String, Object> ce = new LinkedHashMap<>();
            describe(ce, c);
            causes.add(ce);
            if (!e.containsKey("responseCode") && ce.containsKey("responseCode")) {
                e.put("responseCode", ce.get("responseCode"));
            }
            c = c.getCause();
        }
        if (!causes.isEmpty()) {
            e.put("causes", causes);
        }
        return e;
    }

    private static void describe(Map<String, Object> e, Throwable t) {
        e.put("class", t.getClass().getName());
        if (t instanceof MQClientException) {
            MQClientException m = (MQClientException) t;
            e.put("responseCode", m.getResponseCode());
            e.put("errorMessage", m.getErrorMessage());
        } else if (t instanceof MQBrokerException) {
            MQBrokerException m = (MQBrokerException) t;
            e.put("responseCode", m.getResponseCode());
            e.put("errorMessage", m.getErrorMessage());
            try {
                e.put("brokerAddr", m.getBrokerAddr());
            } catch (Throwable ignore) {
                // not in every version
            }
        }
        e.put("message", t.getMessage());
    }

    public static ConsumeFromWhere consumeFrom(String from) {
        if (from == null || from.equals("first")) {
            return ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET;
        }
        if (from.equals("last")) {
            return ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET;
        }
        if (from.startsWith("timestamp:")) {
            return ConsumeFromWhere.CONSUME_FROM_TIMESTAMP;
        }
        throw new Args.UsageException("--from must be first|last|timestamp:yyyyMMddHHmmss, got " + from);
    }

    public static String consumeTimestamp(String from) {
        return from != null && from.startsWith("timestamp:") ? from.substring("timestamp:".length()) : null;
    }

    /**
     * Calls {@code setter(EnumType.valueOf(name))} on target, whatever package
     * the enum lives in (MessageModel moved from
     * org.apache.rocketmq.common.protocol.heartbeat in 4.9 to
     * org.apache.rocketmq.remoting.protocol.heartbeat in 5.x).
     */
    @SuppressWarnings({"unchecked", "rawtypes"})
    public static void setEnumProperty(Object target, String setter, String name) throws Exception {
        for (Method m : target.getClass().getMethods()) {
            if (m.getName().equals(setter) && m.getParameterCount() == 1 && m.getParameterTypes()[0].isEnum()) {
                Class<? extends Enum> type = (Class<? extends Enum>) m.getParameterTypes()[0];
                m.invoke(target, Enum.valueOf(type, name));
                return;
            }
        }
        throw new NoSuchMethodException(target.getClass().getName() + "." + setter + "(enum)");
    }

    /** Invokes a public method by name and argument count, whatever its declared types. */
    public static Object invoke(Object target, String name, Object... args) throws Exception {
        for (Method m : target.getClass().getMethods()) {
            if (m.getName().equals(name) && m.getParameterCount() == args.length) {
                try {
                    return m.invoke(target, args);
                } catch (java.lang.reflect.InvocationTargetException e) {
                    Throwable c = e.getCause();
                    if (c instanceof Exception) {
                        throw (Exception) c;
                    }
                    throw e;
                }
            }
        }
        throw new NoSuchMethodException(target.getClass().getName() + "." + name + "/" + args.length);
    }

    public static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Runs a client shutdown with a time limit so a stuck client cannot hang
     * the harness. The 5.x remoting client ends its shutdown by joining its
     * NettyEventExecutor thread, which only notices the stop flag when its
     * 3 s queue poll times out; once the shutdown is waiting there (all
     * unregister / offset persisting is done by then) that thread is
     * interrupted, which saves ~3 s per client on 5.x.
     */
    public static void shutdownQuietly(Runnable r, long timeoutMs) {
        Thread t = new Thread(() -> {
            try {
                r.run();
            } catch (Throwable ignore) {
                // best effort
            }
        }, "harness-shutdown");
        t.setDaemon(true);
        t.start();
        long deadline = System.currentTimeMillis() + timeoutMs;
        try {
            while (t.isAlive() && System.currentTimeMillis() < deadline) {
                t.join(50);
                if (t.isAlive() && inRemotingClientShutdown(t)) {
                    for (Thread other : Thread.getAllStackTraces().keySet()) {
                        if (other.getName().startsWith("NettyEventExecutor")) {
                            other.interrupt();
                        }
                    }
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static boolean inRemotingClientShutdown(Thread t) {
        return joinsInRemotingClientShutdown(t.getStackTrace());
    }

    /** True for a stack that is in Thread.join called from NettyRemotingClient.shutdown. */
    static boolean joinsInRemotingClientShutdown(StackTraceElement[] stack) {
        boolean joining = false;
        for (StackTraceElement f : stack) {
            if (f.getClassName().equals("java.lang.Thread") && f.getMethodName().equals("join")) {
                joining = true;
            }
            if (joining && f.getClassName().endsWith(".NettyRemotingClient") && f.getMethodName().equals("shutdown")) {
                return true;
            }
        }
        return false;
    }
}
