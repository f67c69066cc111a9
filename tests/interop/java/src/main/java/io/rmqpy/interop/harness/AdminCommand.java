package io.rmqpy.interop.harness;

import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * route / cluster: read-only admin queries through DefaultMQAdminExt. The
 * result classes moved packages between 4.9 and 5.x, so the calls go
 * through reflection and the results are written from their getters.
 */
public final class AdminCommand implements Command {
    private final String name;

    private AdminCommand(String name) {
        this.name = name;
    }

    public static AdminCommand route() {
        return new AdminCommand("route");
    }

    public static AdminCommand cluster() {
        return new AdminCommand("cluster");
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public String usage() {
        if (name.equals("route")) {
            return "route -n NAMESRV -t TOPIC [--timeout-ms 5000] + client options\n"
                + "  Emits {\"event\":\"route\",\"topic\":..,\"route\":TopicRouteData} (examineTopicRouteInfo), then done.";
        }
        return "cluster -n NAMESRV [--timeout-ms 5000] + client options\n"
            + "  Emits {\"event\":\"cluster\",\"clusterInfo\":ClusterInfo} (examineBrokerClusterInfo), then done.";
    }

    /** A started admin client with the client options, in an admin group of this process. */
    static DefaultMQAdminExt startAdmin(Common.ClientOptions client, long timeoutMs) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt(client.rpcHook(), timeoutMs);
        client.apply(admin);
        admin.setAdminExtGroup("harness_admin_" + ProcessHandle.current().pid());
        admin.start();
        return admin;
    }

    @Override
    public Action prepare(Args a) {
        final Common.ClientOptions client = Common.ClientOptions.read(a);
        final String topic = name.equals("route") ? a.required("topic") : null;
        final long timeoutMs = a.lng("timeout-ms", 5000);
        return out -> {
            long start = System.currentTimeMillis();
            DefaultMQAdminExt admin = startAdmin(client, timeoutMs);
            try {
                if (topic != null) {
                    Object route = Common.invoke(admin, "examineTopicRouteInfo", topic);
                    out.event("route").put("topic", topic).put("route", route).emit();
                } else {
                    Object info = Common.invoke(admin, "examineBrokerClusterInfo");
                    out.event("cluster").put("clusterInfo", info).emit();
                }
            } finally {
                Common.shutdownQuietly(admin::shutdown, 10000);
            }
            out.event("done").put("command", name).put("ok", true)
                .put("elapsedMs", System.currentTimeMillis() - start).emit();
            return 0;
        };
    }
}
