package io.rmqpy.interop.harness;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;

/**
 * Runs another program's main class (mqadmin's org.apache.rocketmq.tools.command.MQAdminStartup)
 * several times, one after the other, in one JVM: a test's set-up that creates several topics and
 * groups pays one JVM start instead of one per command. Each run is unchanged (MQAdminStartup.main
 * with that command's arguments: its own admin client, started and shut down), as with
 * {@link FastExit}, whose shutdown shortcut applies to each run. After each run a line
 * {@code #mqadmin-batch-end N} goes to stdout and to stderr, so the caller can split the output.
 * An exception of a run is printed (as MQAdminStartup prints its own) and the next run goes on; a
 * System.exit of a run (mqadmin's answer to arguments it cannot parse) ends the JVM with its status.
 *
 * <pre>java -cp harness.jar:lib/* io.rmqpy.interop.harness.MQAdminBatch MAIN_CLASS SEP args... SEP args...</pre>
 */
public final class MQAdminBatch {
    public static final String END = "#mqadmin-batch-end";

    private MQAdminBatch() {
    }

    public static void main(String[] argv) throws Throwable {
        if (argv.length < 2) {
            System.err.println("usage: MQAdminBatch MAIN_CLASS SEP args... [SEP args...]");
            System.exit(2);
        }
        String sep = argv[1];
        List<List<String>> runs = new ArrayList<>();
        for (int i = 2; i < argv.length; i++) {
            if (argv[i].equals(sep) || runs.isEmpty()) {
                runs.add(new ArrayList<>());
                if (argv[i].equals(sep)) {
                    continue;
                }
            }
            runs.get(runs.size() - 1).add(argv[i]);
        }
        FastExit.startWatcher();
        Method main = Class.forName(argv[0]).getMethod("main", String[].class);
        for (int n = 0; n < runs.size(); n++) {
            try {
                main.invoke(null, (Object) runs.get(n).toArray(new String[0]));
            } catch (InvocationTargetException e) {
                e.getCause().printStackTrace();
            }
            System.out.println(END + " " + n);
            System.out.flush();
            System.err.println(END + " " + n);
            System.err.flush();
        }
        System.exit(0);
    }
}
