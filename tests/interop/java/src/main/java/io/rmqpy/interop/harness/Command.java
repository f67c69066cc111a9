package io.rmqpy.interop.harness;

/**
 * One harness subcommand. To add one: implement this interface and list an
 * instance in {@link Harness#COMMANDS}.
 *
 * <p>{@link #prepare} reads ALL of its options from {@link Args} (and does
 * nothing else); the harness then rejects unknown options and calls
 * {@link Action#run}. Exit code: 0 = success, 1 = failed expectation or
 * error (an {@code error} event says which), 2 = bad usage.</p>
 */
public interface Command {
    String name();

    /** One paragraph: synopsis plus the options, for {@code help}. */
    String usage();

    Action prepare(Args args) throws Exception;

    interface Action {
        int run(Out out) throws Exception;
    }
}
