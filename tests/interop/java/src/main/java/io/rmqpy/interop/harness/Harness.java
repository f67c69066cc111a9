package io.rmqpy.interop.harness;

import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * rmqpy interop harness: drives the stock Apache RocketMQ Java client and
 * prints what happened as JSON lines on stdout (one object per line, always
 * ending with a {@code done} event on success).
 *
 * <pre>java -cp harness.jar:lib-VERSION/* io.rmqpy.interop.harness.Harness SUBCOMMAND [options]</pre>
 *
 * Compiled against the 4.9.8 client; runs on the 4.9.8 and 5.3.3
 * classpaths. Global option: --hard-timeout-ms (default 180000): the JVM
 * halts with exit code 3 after it, whatever the subcommand is doing.
 * Client options (every subcommand): -n/--namesrv ADDR (required),
 * --instance NAME, --client-ip IP, --unit-name NAME, --vip-channel
 * true|false (default false), --poll-namesrv-ms MS, --heartbeat-ms MS,
 * --api-timeout-ms MS, --rebalance-interval-ms MS. Defaults are the client's
 * own: e.g. a new topic's route (such as %RETRY%group after the first
 * send-back) is learnt within --poll-namesrv-ms (30 s) and its queues are
 * assigned at the next rebalance (--rebalance-interval-ms, 20 s).
 */
public final class Harness {
    /** The subcommands; add new ones here. */
    static final List<Command> COMMANDS = Arrays.asList(
        new ProduceCommand(),
        new ConsumePushCommand(),
        new ConsumeLiteCommand(),
        AdminCommand.route(),
        AdminCommand.cluster(),
        new SearchOffsetCommand(),
        new AclCommand(),
        new RoundtripCommand(), new TransactionCommand(), new RequestReplyCommand(), new TimerCommand());

    private Harness() {
    }

    public static void main(String[] argv) {
        // Keep the real stdout for JSON only; anything else printing to
        // System.out (RocketMQ, logback, netty) goes to stderr.
        PrintStream realOut = new PrintStream(new FileOutputStream(FileDescriptor.out), true,
            StandardCharsets.UTF_8);
        System.setOut(System.err);
        Out out = new Out(realOut);
        System.exit(run(argv, out, realOut));
    }

    static int run(String[] argv, Out out, PrintStream realOut) {
        if (argv.length == 0 || argv[0].equals("help") || argv[0].equals("--help") || argv[0].equals("-h")) {
            realOut.println(usage());
            return argv.length == 0 ? 2 : 0;
        }
        Command cmd = find(argv[0]);
        if (cmd == null) {
            out.event("error").put("class", "Usage").put("message", "unknown subcommand " + argv[0]).emit();
            System.err.println(usage());
            return 2;
        }
        Command.Action action;
        try {
            Args args = new Args(argv, 1);
            long hardTimeoutMs = args.lng("hard-timeout-ms", 180000);
            action = cmd.prepare(args);
            args.checkAllUsed();
            startWatchdog(out, cmd.name(), hardTimeoutMs);
        } catch (Args.UsageException e) {
            out.event("error").put("class", "Usage").put("message", e.getMessage()).emit();
            System.err.println("usage: " + cmd.usage());
            return 2;
        } catch (Throwable t) {
            out.event("error").put("command", cmd.name()).putAll(Common.errorFields(t)).emit();
            return 1;
        }
        try {
            return action.run(out);
        } catch (Args.UsageException e) {
            out.event("error").put("class", "Usage").put("message", e.getMessage()).emit();
            return 2;
        } catch (Throwable t) {
            t.printStackTrace();
            Map<String, Object> e = new LinkedHashMap<>(Common.errorFields(t));
            out.event("error").put("command", cmd.name()).putAll(e).emit();
            return 1;
        }
    }

    static Command find(String name) {
        for (Command c : COMMANDS) {
            if (c.name().equals(name)) {
                return c;
            }
        }
        return null;
    }

    static String usage() {
        StringBuilder sb = new StringBuilder();
        sb.append("rmqpy interop harness: java -cp harness.jar:lib/* io.rmqpy.interop.harness.Harness SUBCOMMAND ...\n");
        sb.append("Output: JSON lines on stdout. Exit: 0 ok, 1 failure, 2 usage, 3 hard timeout.\n");
        sb.append("Client options (all subcommands): -n/--namesrv ADDR, --instance NAME, --client-ip IP, --unit-name N,\n");
        sb.append("  --vip-channel true|false, --poll-namesrv-ms MS (30000), --heartbeat-ms MS, --api-timeout-ms MS,\n");
        sb.append("  --rebalance-interval-ms MS (20000),\n");
        sb.append("  --hard-timeout-ms MS (default 180000).\n\n");
        for (Command c : COMMANDS) {
            sb.append(c.usage()).append("\n\n");
        }
        return sb.toString();
    }

    private static void startWatchdog(final Out out, final String name, final long ms) {
        Thread t = new Thread(() -> {
            try {
                Thread.sleep(ms);
            } catch (InterruptedException e) {
                return;
            }
            out.event("error").put("class", "HarnessHardTimeout").put("command", name)
                .put("message", "still running after " + ms + " ms; halting").emit();
            Runtime.getRuntime().halt(3);
        }, "harness-watchdog");
        t.setDaemon(true);
        t.start();
    }
}
