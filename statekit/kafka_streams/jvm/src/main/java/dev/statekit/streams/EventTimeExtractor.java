package dev.statekit.streams;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.streams.processor.TimestampExtractor;

/**
 * A record's time is its event's time: -1 (Kafka Streams drops the record and counts it in
 * the dropped-records metric) for a malformed event, or one whose time lies more than the
 * spec's max_event_time_ahead after its Kafka record's timestamp.
 */
public final class EventTimeExtractor implements TimestampExtractor {
    private final EventParser parser;
    private final long maxAheadMs;

    public EventTimeExtractor(Spec spec) {
        this.parser = new EventParser(spec);
        this.maxAheadMs = spec.maxEventTimeAheadMs;
    }

    @Override
    public long extract(ConsumerRecord<Object, Object> record, long partitionTime) {
        JsonNode event = parser.parse((String) record.value());
        if (event == null) {
            return -1;
        }
        long time = parser.eventTimeMs(event);
        if (time < 0 || (maxAheadMs >= 0 && time - record.timestamp() > maxAheadMs)) {
            return -1;
        }
        return time;
    }
}
