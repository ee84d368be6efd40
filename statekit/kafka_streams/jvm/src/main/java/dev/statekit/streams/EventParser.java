package dev.statekit.streams;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeParseException;

/**
 * Reads one JSON event as statekit's query does: a JSON object whose group keys and event
 * time are present and not null, the event time an ISO-8601 string (no offset means UTC), an
 * aggregated column null, absent or a JSON number. Anything else is malformed (null).
 */
public final class EventParser {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final Spec spec;

    public EventParser(Spec spec) {
        this.spec = spec;
    }

    /** The event as a JSON object, or null when it is malformed. */
    public JsonNode parse(String value) {
        if (value == null) {
            return null;
        }
        JsonNode event;
        try {
            event = JSON.readTree(value);
        } catch (Exception notJson) {
            return null;
        }
        if (event == null || !event.isObject()) {
            return null;
        }
        for (String key : spec.keys) {
            if (event.path(key).isNull() || event.path(key).isMissingNode()) {
                return null;
            }
        }
        for (Spec.Aggregate agg : spec.aggregates) {
            JsonNode field = agg.column() == null ? null : event.get(agg.column());
            boolean numeric = !agg.function().equals("count");
            if (numeric && field != null && !field.isNull() && !field.isNumber()) {
                return null;
            }
        }
        return eventTimeMs(event) == null ? null : event;
    }

    /** The event time in epoch milliseconds, or null when absent or not ISO-8601. */
    public Long eventTimeMs(JsonNode event) {
        JsonNode field = event.get(spec.eventTime);
        if (field == null || !field.isTextual()) {
            return null;
        }
        String text = field.asText().trim();
        try {
            return OffsetDateTime.parse(text).toInstant().toEpochMilli();
        } catch (DateTimeParseException noOffset) {
            // no offset: UTC
        }
        try {
            return LocalDateTime.parse(text.replace(' ', 'T')).toInstant(ZoneOffset.UTC)
                    .toEpochMilli();
        } catch (DateTimeParseException notDateTime) {
            // a date alone
        }
        try {
            Instant midnight = LocalDate.parse(text).atStartOfDay().toInstant(ZoneOffset.UTC);
            return midnight.toEpochMilli();
        } catch (DateTimeParseException notDate) {
            return null;
        }
    }

    /** The group key: the key column's text, or a JSON array of them for several keys. */
    public String groupKey(JsonNode event) {
        if (spec.keys.size() == 1) {
            return event.get(spec.keys.get(0)).asText();
        }
        var array = JSON.createArrayNode();
        for (String key : spec.keys) {
            array.add(event.get(key).asText());
        }
        return array.toString();
    }
}
