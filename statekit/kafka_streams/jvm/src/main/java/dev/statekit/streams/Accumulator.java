package dev.statekit.streams;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;

/**
 * The state of one group (key and window): rows seen and, per aggregate, its non-null values'
 * count, sum, min and max. Nulls as in SQL: count counts rows, count(col) non-null values,
 * sum/min/max/avg skip nulls and are null when every value was.
 */
public final class Accumulator {
    private static final ObjectMapper JSON = new ObjectMapper();

    long rows;
    final long[] count;
    final double[] sum;
    final double[] min;
    final double[] max;

    public Accumulator(int aggregates) {
        count = new long[aggregates];
        sum = new double[aggregates];
        min = new double[aggregates];
        max = new double[aggregates];
        java.util.Arrays.fill(min, Double.POSITIVE_INFINITY);
        java.util.Arrays.fill(max, Double.NEGATIVE_INFINITY);
    }

    /** Adds one event; returns this. */
    public Accumulator add(List<Spec.Aggregate> aggregates, JsonNode event) {
        rows++;
        for (int i = 0; i < aggregates.size(); i++) {
            String column = aggregates.get(i).column();
            JsonNode value = column == null ? null : event.get(column);
            if (value == null || value.isNull()) {
                continue;
            }
            count[i]++;
            if (value.isNumber()) {
                double x = value.asDouble();
                sum[i] += x;
                min[i] = Math.min(min[i], x);
                max[i] = Math.max(max[i], x);
            }
        }
        return this;
    }

    /** Two sessions' states as one (a session that an event joined to another). */
    public static Accumulator merge(Accumulator a, Accumulator b) {
        Accumulator out = new Accumulator(a.count.length);
        out.rows = a.rows + b.rows;
        for (int i = 0; i < a.count.length; i++) {
            out.count[i] = a.count[i] + b.count[i];
            out.sum[i] = a.sum[i] + b.sum[i];
            out.min[i] = Math.min(a.min[i], b.min[i]);
            out.max[i] = Math.max(a.max[i], b.max[i]);
        }
        return out;
    }

    /** The aggregates' values by name, as statekit's snapshot columns hold them. */
    public ObjectNode values(List<Spec.Aggregate> aggregates) {
        ObjectNode out = JSON.createObjectNode();
        for (int i = 0; i < aggregates.size(); i++) {
            Spec.Aggregate agg = aggregates.get(i);
            boolean none = count[i] == 0;
            switch (agg.function()) {
                case "count" -> out.put(agg.name(), agg.column() == null ? rows : count[i]);
                case "sum" -> putOrNull(out, agg.name(), none, sum[i]);
                case "min" -> putOrNull(out, agg.name(), none, min[i]);
                case "max" -> putOrNull(out, agg.name(), none, max[i]);
                case "avg" -> putOrNull(out, agg.name(), none, sum[i] / count[i]);
                default -> throw new IllegalArgumentException("unknown aggregate " + agg);
            }
        }
        return out;
    }

    private static void putOrNull(ObjectNode out, String name, boolean none, double value) {
        if (none) {
            out.putNull(name);
        } else {
            out.put(name, value);
        }
    }
}
