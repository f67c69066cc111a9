package io.rmqpy.interop.harness;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.Map;

/**
 * Runs another program's main class unchanged (e.g. mqadmin's
 * org.apache.rocketmq.tools.command.MQAdminStartup), only cutting the wait
 * at the very end of a remoting client shutdown: NettyRemotingClient joins
 * its NettyEventExecutor thread, which sees the stop flag only when its 3 s
 * queue poll times out. While some thread waits there, this interrupts that
 * thread (the poll returns at once and the loop ends). And when main
 * returns, it exits at once with status 0 instead of waiting ~2-3 s for
 * netty's graceful event-loop shutdown (quiet period) to let the JVM end.
 * What the program does and prints is untouched; System.exit calls of its
 * own keep their status.
 *
 * <pre>java -cp harness.jar:lib/* io.rmqpy.interop.harness.FastExit MAIN_CLASS [args...]</pre>
 */
public final class FastExit {
    private FastExit() {
    }

    public static void main(String[] argv) throws Throwable {
        if (argv.length == 0) {
            System.err.println("usage: FastExit MAIN_CLASS [args...]");
            System.exit(2);
        }
        startWatcher();
        Method main = Class.forName(argv[0]).getMethod("main", String[].class);
        try {
            main.invoke(null, (Object) Arrays.copyOfRange(argv, 1, argv.length));
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
        System.out.flush();
        System.err.flush();
        System.exit(0);
    }

    /** Starts the thread that cuts the wait at the end of each remoting client shutdown (see above). */
    static void startWatcher() {
        Thread watcher = new Thread(FastExit::watch, "fastexit-watcher");
        watcher.setDaemon(true);
        watcher.start();
    }

    private static void watch() {
        while (true) {
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                return;
            }
            Map<Thread, StackTraceElement[]> all = Thread.getAllStackTraces();
            boolean waiting = false;
            for (Map.Entry<Thread, StackTraceElement[]> e : all.entrySet()) {
                if (Common.joinsInRemotingClientShutdown(e.getValue())) {
                    waiting = true;
                    break;
                }
            }
            if (waiting) {
                for (Thread t : all.keySet()) {
                    if (t.getName().startsWith("NettyEventExecutor")) {
                        t.interrupt();
                    }
                }
            }
        }
    }
}
