package io.rmqpy.interop.harness;

import java.io.PrintStream;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Writes one JSON object per line to the REAL stdout. Harness.main moves
 * System.out to stderr before any RocketMQ class loads, so stray library
 * output can never corrupt the JSON stream.
 */
public final class Out {
    private final PrintStream stdout;

    public Out(PrintStream stdout) {
        this.stdout = stdout;
    }

    public synchronized void emit(Map<String, ?> event) {
        stdout.println(Json.write(event));
        stdout.flush();
    }

    /** Starts an ordered event: {@code out.event("sent").put(...)...emit()}. */
    public Event event(String name) {
        return new Event(this, name);
    }

    public static final class Event {
        private final Out out;
        private final Map<String, Object> fields = new LinkedHashMap<>();

        Event(Out out, String name) {
            this.out = out;
            fields.put("event", name);
        }

        public Event put(String key, Object value) {
            fields.put(key, value);
            return this;
        }

        public Event putAll(Map<String, ?> more) {
            fields.putAll(more);
            return this;
        }

        public Map<String, Object> fields() {
            return fields;
        }

        public void emit() {
            out.emit(fields);
        }
    }
}
