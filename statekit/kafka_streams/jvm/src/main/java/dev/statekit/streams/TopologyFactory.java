package dev.statekit.streams;

import java.time.Duration;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The topology of a Spec: the input topic's JSON events (timed by EventTimeExtractor,
 * malformed ones dropped), re-keyed by the group key (through the repartition topic
 * {@code <application.id>-aggregate-repartition}), aggregated into the RocksDB store
 * {@value #STORE} with its changelog {@code <application.id>-aggregate-changelog}: a window
 * store (tumbling, hopping), a session store, or a key-value store (running aggregate).
 */
public final class TopologyFactory {
    public static final String STORE = "aggregate";

    private TopologyFactory() {}

    public static Topology build(String topic, Spec spec) {
        EventParser parser = new EventParser(spec);
        Serde<Accumulator> values = AccumulatorSerde.serde();
        int width = spec.aggregates.size();
        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> grouped = builder
                .stream(topic, Consumed.with(Serdes.String(), Serdes.String())
                        .withTimestampExtractor(new EventTimeExtractor(spec)))
                .groupBy((key, value) -> parser.groupKey(parser.parse(value)),
                        Grouped.with(STORE, Serdes.String(), Serdes.String()));
        switch (spec.kind) {
            case "tumbling", "hopping" -> {
                TimeWindows windows = TimeWindows.ofSizeAndGrace(
                        Duration.ofMillis(spec.sizeMs), Duration.ofMillis(spec.graceMs))
                        .advanceBy(Duration.ofMillis(spec.slideMs));
                grouped.windowedBy(windows).aggregate(
                        () -> new Accumulator(width),
                        (key, value, acc) -> acc.add(spec.aggregates, parser.parse(value)),
                        Materialized.<String, Accumulator, WindowStore<Bytes, byte[]>>as(STORE)
                                .withKeySerde(Serdes.String()).withValueSerde(values));
            }
            case "session" -> grouped
                    .windowedBy(SessionWindows.ofInactivityGapAndGrace(
                            Duration.ofMillis(spec.sizeMs), Duration.ofMillis(spec.graceMs)))
                    .aggregate(
                            () -> new Accumulator(width),
                            (key, value, acc) -> acc.add(spec.aggregates, parser.parse(value)),
                            (key, left, right) -> Accumulator.merge(left, right),
                            Materialized.<String, Accumulator, SessionStore<Bytes, byte[]>>as(STORE)
                                    .withKeySerde(Serdes.String()).withValueSerde(values));
            case "running" -> grouped.aggregate(
                    () -> new Accumulator(width),
                    (key, value, acc) -> acc.add(spec.aggregates, parser.parse(value)),
                    Materialized.<String, Accumulator, KeyValueStore<Bytes, byte[]>>as(STORE)
                            .withKeySerde(Serdes.String()).withValueSerde(values));
            default -> throw new IllegalArgumentException("unknown window kind " + spec.kind);
        }
        return builder.build();
    }
}
