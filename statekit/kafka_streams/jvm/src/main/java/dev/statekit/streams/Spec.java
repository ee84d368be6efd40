package dev.statekit.streams;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;

/**
 * What the application computes: statekit's QuerySpec, as statekit.kafka_streams.spec_json
 * writes it (durations already in milliseconds), e.g.
 * {"keys": ["player"], "event_time": "ts", "window": {"kind": "tumbling", "size_ms": 600000},
 *  "grace_ms": 600000, "max_event_time_ahead_ms": 86400000,
 *  "aggregates": [{"function": "count", "column": null}, {"function": "sum", "column": "score"}]}
 */
public final class Spec {
    /** One aggregate: function (count, sum, min, max, avg) over column (null: rows). */
    public record Aggregate(String function, String column, String name) {}

    public final List<String> keys = new ArrayList<>();
    public final String eventTime;
    /** tumbling, hopping, session or running (no window). */
    public final String kind;
    public final long sizeMs;
    public final long slideMs;
    public final long graceMs;
    /** -1: no bound. */
    public final long maxEventTimeAheadMs;
    public final List<Aggregate> aggregates = new ArrayList<>();

    public Spec(JsonNode json) {
        for (JsonNode key : required(json, "keys")) {
            keys.add(key.asText());
        }
        eventTime = required(json, "event_time").asText();
        JsonNode window = json.get("window");
        if (window == null || window.isNull()) {
            kind = "running";
            sizeMs = 0;
            slideMs = 0;
        } else {
            kind = required(window, "kind").asText();
            sizeMs = required(window, "size_ms").asLong();
            slideMs = window.path("slide_ms").asLong(sizeMs);
        }
        graceMs = json.path("grace_ms").asLong(0);
        maxEventTimeAheadMs = json.path("max_event_time_ahead_ms").asLong(-1);
        for (JsonNode agg : required(json, "aggregates")) {
            String function = required(agg, "function").asText();
            String column = agg.path("column").isTextual() ? agg.get("column").asText() : null;
            aggregates.add(new Aggregate(function, column,
                    column == null ? function : function + "_" + column));
        }
    }

    private static JsonNode required(JsonNode json, String field) {
        JsonNode value = json.get(field);
        if (value == null || value.isNull()) {
            throw new IllegalArgumentException("the spec has no " + field + ": " + json);
        }
        return value;
    }
}
