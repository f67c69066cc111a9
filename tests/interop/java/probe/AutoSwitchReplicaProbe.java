// A Java 5.3.3 store as an AutoSwitch HA replica, with Apache's own classes (DefaultMessageStore with
// enableControllerMode, hence AutoSwitchHAService and AutoSwitchHAClient), for
// tests/interop/test_autoswitch_ha_java.py:
//   AutoSwitchReplicaProbe STORE_DIR MASTER_HA_ADDR BROKER_ID UNTIL_OFFSET TIMEOUT_MS HA_LISTEN_PORT FILE_SIZE
// Replicates from the master until its commit log reaches UNTIL_OFFSET, shuts the store down and prints
// "result MAX_OFFSET CONFIRM_OFFSET" and one "epoch EPOCH START" line per epoch entry; exit 0, or 1 on the timeout.
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.remoting.protocol.EpochEntry;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.config.BrokerRole;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.ha.autoswitch.AutoSwitchHAService;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

public class AutoSwitchReplicaProbe {
    public static void main(String[] args) throws Exception {
        String dir = args[0];
        long until = Long.parseLong(args[3]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[4]);
        MessageStoreConfig cfg = new MessageStoreConfig();
        cfg.setStorePathRootDir(dir);
        cfg.setStorePathCommitLog(dir + "/commitlog");
        cfg.setMappedFileSizeCommitLog(Integer.parseInt(args[6]));
        cfg.setMappedFileSizeConsumeQueue(20 * 10000);
        cfg.setMaxHashSlotNum(20000);
        cfg.setMaxIndexNum(80000);
        cfg.setHaListenPort(Integer.parseInt(args[5]));
        cfg.setHaSendHeartbeatInterval(1000);  // its first report comes after one interval
        cfg.setBrokerRole(BrokerRole.SLAVE);
        BrokerConfig broker = new BrokerConfig();
        broker.setEnableControllerMode(true);
        broker.setBrokerId(Long.parseLong(args[2]));  // not 0: a master's reput skips what it cannot read
        DefaultMessageStore store = new DefaultMessageStore(cfg, new BrokerStatsManager("probe", true), null, broker,
            new ConcurrentHashMap<>());
        if (!store.load()) {
            throw new IllegalStateException("load failed");
        }
        store.start();
        AutoSwitchHAService ha = (AutoSwitchHAService) store.getHaService();
        ha.changeToSlave("", 1, Long.parseLong(args[2]));
        ha.updateHaMasterAddress(args[1]);
        while (store.getMaxPhyOffset() < until && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
        while (store.dispatchBehindBytes() > 0 && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);  // the consume queues are built up to the confirm offset
        }
        long max = store.getMaxPhyOffset();
        long confirm = store.getConfirmOffset();
        store.shutdown();
        System.out.println("result " + max + " " + confirm);
        for (EpochEntry e : ha.getEpochEntries()) {
            System.out.println("epoch " + e.getEpoch() + " " + e.getStartOffset());
        }
        System.out.flush();
        System.exit(max >= until ? 0 : 1);
    }
}
