package io.rmqpy.interop.harness;

import java.lang.reflect.Array;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.ArrayList;
import java.util.Collection;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Minimal JSON writer with no third-party dependency (fastjson differs
 * between RocketMQ 4.9 and 5.x and writes non-standard JSON for maps with
 * numeric keys). Java beans (e.g. TopicRouteData, ClusterInfo) are written
 * from their public getters, sorted by property name, so the same code
 * serialises the 4.9 and the 5.x classes without referring to either.
 */
public final class Json {
    private Json() {
    }

    public static String write(Object value) {
        StringBuilder sb = new StringBuilder(128);
        write(sb, value, new IdentityHashMap<>(), 0);
        return sb.toString();
    }

    private static void write(StringBuilder sb, Object v, IdentityHashMap<Object, Boolean> seen, int depth) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof RawJson) {
            sb.append(((RawJson) v).json);
        } else if (v instanceof CharSequence || v instanceof Character) {
            string(sb, v.toString());
        } else if (v instanceof Boolean) {
            sb.append(v.toString());
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                string(sb, v.toString());
            } else {
                sb.append(v.toString());
            }
        } else if (v instanceof Number) {
            sb.append(v.toString());
        } else if (v instanceof Enum) {
            string(sb, ((Enum<?>) v).name());
        } else if (v instanceof InetSocketAddress) {
            InetSocketAddress a = (InetSocketAddress) v;
            string(sb, (a.getAddress() != null ? a.getAddress().getHostAddress() : a.getHostString()) + ":" + a.getPort());
        } else if (v instanceof SocketAddress) {
            string(sb, v.toString());
        } else if (v instanceof byte[]) {
            string(sb, java.util.Base64.getEncoder().encodeToString((byte[]) v));
        } else if (depth > 12 || seen.containsKey(v)) {
            string(sb, String.valueOf(v));
        } else if (v instanceof Map) {
            seen.put(v, Boolean.TRUE);
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                string(sb, String.valueOf(e.getKey()));
                sb.append(':');
                write(sb, e.getValue(), seen, depth + 1);
            }
            sb.append('}');
            seen.remove(v);
        } else if (v instanceof Collection || v.getClass().isArray()) {
            seen.put(v, Boolean.TRUE);
            List<Object> items = new ArrayList<>();
            if (v instanceof Collection) {
                items.addAll((Collection<?>) v);
            } else {
                for (int i = 0, n = Array.getLength(v); i < n; i++) {
                    items.add(Array.get(v, i));
                }
            }
            sb.append('[');
            for (int i = 0; i < items.size(); i++) {
                if (i > 0) {
                    sb.append(',');
                }
                write(sb, items.get(i), seen, depth + 1);
            }
            sb.append(']');
            seen.remove(v);
        } else if (isBean(v)) {
            seen.put(v, Boolean.TRUE);
            write(sb, beanToMap(v), seen, depth);
            seen.remove(v);
        } else {
            string(sb, v.toString());
        }
    }

    private static boolean isBean(Object v) {
        String n = v.getClass().getName();
        return n.startsWith("org.apache.rocketmq.") || n.startsWith("io.rmqpy.");
    }

    /** Public no-arg getters of a bean, by property name (sorted). */
    public static Map<String, Object> beanToMap(Object bean) {
        Map<String, Object> m = new TreeMap<>();
        for (Method method : bean.getClass().getMethods()) {
            if (Modifier.isStatic(method.getModifiers()) || method.getParameterCount() != 0
                || method.getDeclaringClass() == Object.class) {
                continue;
            }
            String name = method.getName();
            String prop;
            if (name.startsWith("get") && name.length() > 3) {
                prop = name.substring(3);
            } else if (name.startsWith("is") && name.length() > 2
                && (method.getReturnType() == boolean.class || method.getReturnType() == Boolean.class)) {
                prop = name.substring(2);
            } else {
                continue;
            }
            prop = Character.toLowerCase(prop.charAt(0)) + prop.substring(1);
            try {
                m.put(prop, method.invoke(bean));
            } catch (Throwable ignore) {
                // getters that throw are left out
            }
        }
        return m;
    }

    private static void string(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                case '\b':
                    sb.append("\\b");
                    break;
                case '\f':
                    sb.append("\\f");
                    break;
                default:
                    if (c < 0x20 || (c >= 0xD800 && c <= 0xDFFF && !validSurrogate(s, i)) || c == 0x2028 || c == 0x2029) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }

    private static boolean validSurrogate(String s, int i) {
        char c = s.charAt(i);
        if (Character.isHighSurrogate(c)) {
            return i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
        }
        return i > 0 && Character.isHighSurrogate(s.charAt(i - 1));
    }

    /** Pre-serialised JSON inserted verbatim. */
    public static final class RawJson {
        final String json;

        public RawJson(String json) {
            this.json = json;
        }
    }
}
