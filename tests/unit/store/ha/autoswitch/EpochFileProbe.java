// Apache RocketMQ's own EpochFileCache (rocketmq-store 5.3.3) writing and reading epoch files,
// for tests/unit/store/ha/autoswitch/test_epoch.py:
//   EpochFileProbe WRITE_PATH READ_PATH EPOCH-START...
// appends each EPOCH-START to a cache kept in WRITE_PATH (Java writes that file), then reads
// READ_PATH with initCacheFromFile and prints "entry EPOCH START END" per entry ("unreadable"
// when it cannot), "refused EPOCH-START" for an entry appendEntry refused.
import org.apache.rocketmq.remoting.protocol.EpochEntry;
import org.apache.rocketmq.store.ha.autoswitch.EpochFileCache;

public class EpochFileProbe {
    public static void main(String[] args) {
        EpochFileCache written = new EpochFileCache(args[0]);
        for (int i = 2; i < args.length; i++) {
            String[] p = args[i].split("-");
            if (!written.appendEntry(new EpochEntry(Integer.parseInt(p[0]), Long.parseLong(p[1])))) {
                System.out.println("refused " + args[i]);
            }
        }
        EpochFileCache read = new EpochFileCache(args[1]);
        if (!read.initCacheFromFile()) {
            System.out.println("unreadable");
        }
        for (EpochEntry e : read.getAllEntries()) {
            System.out.println("entry " + e.getEpoch() + " " + e.getStartOffset() + " " + e.getEndOffset());
        }
        System.exit(0);
    }
}
