package io.rmqpy.interop.harness;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Command-line options of one subcommand.
 *
 * <p>Accepted forms: {@code --name value}, {@code --name=value}, a bare
 * {@code --flag} (value "true"), and the short aliases {@code -n} (namesrv),
 * {@code -t} (topic), {@code -g} (group), {@code -c} (count). An option may
 * repeat (see {@link #all}). Every option must be read by the subcommand;
 * {@link #checkAllUsed()} rejects the ones nobody asked for, so typos fail
 * loudly instead of being ignored.</p>
 */
public final class Args {
    private static final Map<String, String> SHORT = new HashMap<>();

    static {
        SHORT.put("-n", "namesrv");
        SHORT.put("-t", "topic");
        SHORT.put("-g", "group");
        SHORT.put("-c", "count");
    }

    private final Map<String, List<String>> values = new LinkedHashMap<>();
    private final Set<String> used = new LinkedHashSet<>();

    public Args(String[] argv, int from) {
        for (int i = from; i < argv.length; i++) {
            String a = argv[i];
            String name;
            String value = null;
            if (SHORT.containsKey(a)) {
                name = SHORT.get(a);
            } else if (a.startsWith("--") && a.length() > 2) {
                name = a.substring(2);
                int eq = name.indexOf('=');
                if (eq >= 0) {
                    value = name.substring(eq + 1);
                    name = name.substring(0, eq);
                }
            } else {
                throw new UsageException("unexpected argument: " + a);
            }
            if (value == null) {
                if (i + 1 < argv.length && (!argv[i + 1].startsWith("-") || isNumber(argv[i + 1]))) {
                    value = argv[++i];
                } else {
                    value = "true";
                }
            }
            values.computeIfAbsent(name, k -> new ArrayList<>()).add(value);
        }
    }

    private static boolean isNumber(String s) {
        try {
            Long.parseLong(s);
            return true;
        } catch (NumberFormatException e) {
            return false;
        }
    }

    public boolean has(String name) {
        used.add(name);
        return values.containsKey(name);
    }

    public String str(String name, String def) {
        used.add(name);
        List<String> v = values.get(name);
        return v == null ? def : v.get(v.size() - 1);
    }

    public String required(String name) {
        String v = str(name, null);
        if (v == null || v.isEmpty()) {
            throw new UsageException("missing required option --" + name);
        }
        return v;
    }

    public List<String> all(String name) {
        used.add(name);
        List<String> v = values.get(name);
        return v == null ? Collections.<String>emptyList() : v;
    }

    public int integer(String name, int def) {
        String v = str(name, null);
        try {
            return v == null ? def : Integer.parseInt(v);
        } catch (NumberFormatException e) {
            throw new UsageException("--" + name + " needs an integer, got " + v);
        }
    }

    public long lng(String name, long def) {
        String v = str(name, null);
        try {
            return v == null ? def : Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new UsageException("--" + name + " needs an integer, got " + v);
        }
    }

    public boolean bool(String name, boolean def) {
        String v = str(name, null);
        if (v == null) {
            return def;
        }
        if (v.equalsIgnoreCase("true") || v.equals("1") || v.equalsIgnoreCase("yes")) {
            return true;
        }
        if (v.equalsIgnoreCase("false") || v.equals("0") || v.equalsIgnoreCase("no")) {
            return false;
        }
        throw new UsageException("--" + name + " needs true/false, got " + v);
    }

    /** One of the allowed words (case-insensitive), returned in lower case. */
    public String choice(String name, String def, String... allowed) {
        String v = str(name, def);
        if (v == null) {
            return null;
        }
        for (String a : allowed) {
            if (a.equalsIgnoreCase(v)) {
                return a;
            }
        }
        throw new UsageException("--" + name + " must be one of " + String.join("|", allowed) + ", got " + v);
    }

    /** Repeated {@code --name k=v} options as an ordered map. */
    public Map<String, String> keyValues(String name) {
        Map<String, String> m = new LinkedHashMap<>();
        for (String kv : all(name)) {
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                throw new UsageException("--" + name + " needs key=value, got " + kv);
            }
            m.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return m;
    }

    /** Comma-separated integers, or null when the option is absent. */
    public List<Integer> intList(String name) {
        String v = str(name, null);
        if (v == null) {
            return null;
        }
        List<Integer> out = new ArrayList<>();
        for (String p : v.split(",")) {
            if (!p.trim().isEmpty()) {
                try {
                    out.add(Integer.parseInt(p.trim()));
                } catch (NumberFormatException e) {
                    throw new UsageException("--" + name + " needs comma-separated integers, got " + v);
                }
            }
        }
        return out;
    }

    public void checkAllUsed() {
        List<String> unknown = new ArrayList<>();
        for (String k : values.keySet()) {
            if (!used.contains(k)) {
                unknown.add("--" + k);
            }
        }
        if (!unknown.isEmpty()) {
            throw new UsageException("unknown option(s): " + String.join(" ", unknown));
        }
    }

    /** Bad command line: exit code 2. */
    public static final class UsageException extends RuntimeException {
        public UsageException(String msg) {
            super(msg);
        }
    }
}
