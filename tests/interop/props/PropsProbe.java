import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;

/**
 * What java.util.Properties makes of files, for tests/interop/test_properties_java.py.
 *
 * load FILE...    : Properties.load(InputStream) of each FILE (ISO-8859-1, as BrokerStartup reads -c),
 *                   writes FILE.out: one "hex(key) hex(value)" line per entry, or "ERROR <message>".
 * loadutf8 FILE...: the same with Properties.load(Reader) in UTF-8.
 * store FILE...   : FILE holds "hex(key) hex(value)" lines; writes FILE.out with Properties.store(OutputStream).
 * Hex is of the UTF-16 code units (4 digits each), so any Java string survives.
 */
public class PropsProbe {
    static String hex(String s) {
        StringBuilder b = new StringBuilder("x");
        for (char c : s.toCharArray()) b.append(String.format("%04x", (int) c));
        return b.toString();
    }

    static String unhex(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 1; i < s.length(); i += 4) b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
        return b.toString();
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        for (int i = 1; i < args.length; i++) {
            Path in = Paths.get(args[i]);
            Path out = Paths.get(args[i] + ".out");
            if (mode.equals("store")) {
                Properties p = new Properties();
                for (String line : Files.readAllLines(in, StandardCharsets.US_ASCII)) {
                    if (line.isEmpty()) continue;
                    String[] kv = line.split(" ", -1);
                    p.setProperty(unhex(kv[0]), unhex(kv[1]));
                }
                try (OutputStream os = Files.newOutputStream(out)) {
                    p.store(os, null);
                }
                continue;
            }
            StringBuilder b = new StringBuilder();
            try {
                Properties p = new Properties();
                if (mode.equals("load")) {
                    try (InputStream is = new BufferedInputStream(Files.newInputStream(in))) { p.load(is); }
                } else {
                    try (Reader r = Files.newBufferedReader(in, StandardCharsets.UTF_8)) { p.load(r); }
                }
                for (String k : p.stringPropertyNames()) b.append(hex(k)).append(' ').append(hex(p.getProperty(k))).append('\n');
            } catch (IllegalArgumentException e) {
                b.setLength(0);
                b.append("ERROR ").append(e.getMessage()).append('\n');
            }
            Files.write(out, b.toString().getBytes(StandardCharsets.US_ASCII));
        }
    }
}
