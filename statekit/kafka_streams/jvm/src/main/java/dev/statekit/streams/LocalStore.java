package dev.statekit.streams;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsMetadata;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.HostInfo;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.QueryableStoreType;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyWindowStore;
import org.apache.kafka.streams.state.WindowStoreIterator;

/**
 * This instance's copy of the store, read through Kafka Streams' interactive queries: by key
 * (one partition), or every entry in a key range (null ends: open) of the partitions this
 * instance holds as active, or as standby too when {@code stale} (enableStaleStores).
 * Each entry is a JSON row: key, partition, window_start and window_end (epoch ms, windowed
 * stores; a session's end is its last event's time), then the aggregates' values.
 */
public final class LocalStore {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final KafkaStreams streams;
    private final Spec spec;
    private final HostInfo self;
    private final String repartitionTopic;

    public LocalStore(KafkaStreams streams, Spec spec, HostInfo self, String applicationId) {
        this.streams = streams;
        this.spec = spec;
        this.self = self;
        this.repartitionTopic = applicationId + "-" + TopologyFactory.STORE + "-repartition";
    }

    /** Rows of {@code key} (windows starting in [from, to] for windowed stores). */
    public ArrayNode byKey(String key, int partition, boolean stale, long from, long to) {
        ArrayNode rows = JSON.createArrayNode();
        switch (spec.kind) {
            case "tumbling", "hopping" -> {
                try (WindowStoreIterator<Accumulator> it = store(
                        QueryableStoreTypes.<String, Accumulator>windowStore(), partition, stale)
                        .fetch(key, Instant.ofEpochMilli(from), Instant.ofEpochMilli(to))) {
                    it.forEachRemaining(kv -> rows.add(row(key, partition, kv.key,
                            kv.key + spec.sizeMs, kv.value)));
                }
            }
            case "session" -> {
                try (KeyValueIterator<Windowed<String>, Accumulator> it = store(
                        QueryableStoreTypes.<String, Accumulator>sessionStore(), partition,
                        stale).fetch(key)) {
                    it.forEachRemaining(kv -> addWindowed(rows, kv, partition, from, to));
                }
            }
            default -> {
                Accumulator value = store(QueryableStoreTypes.<String, Accumulator>keyValueStore(),
                        partition, stale).get(key);
                if (value != null) {
                    rows.add(row(key, partition, null, null, value));
                }
            }
        }
        return rows;
    }

    /** Every row with a key in [keyFrom, keyTo] (null: open) held here. */
    public ArrayNode range(String keyFrom, String keyTo, boolean stale, long from, long to) {
        ArrayNode rows = JSON.createArrayNode();
        for (int partition : partitions(stale)) {
            switch (spec.kind) {
                case "tumbling", "hopping" -> {
                    ReadOnlyWindowStore<String, Accumulator> store = store(
                            QueryableStoreTypes.<String, Accumulator>windowStore(), partition,
                            stale);
                    // the record cache walks a time range segment by segment: an open one
                    // (0 .. Long.MAX_VALUE) reads everything instead
                    boolean openTime = from == 0 && to == Long.MAX_VALUE;
                    try (KeyValueIterator<Windowed<String>, Accumulator> it = openTime
                            ? store.all() : store.fetch(keyFrom, keyTo,
                                    Instant.ofEpochMilli(from), Instant.ofEpochMilli(to))) {
                        it.forEachRemaining(kv -> {
                            if (inRange(kv.key.key(), keyFrom, keyTo)) {
                                addWindowed(rows, kv, partition, from, to);
                            }
                        });
                    }
                }
                case "session" -> {
                    try (KeyValueIterator<Windowed<String>, Accumulator> it = store(
                            QueryableStoreTypes.<String, Accumulator>sessionStore(), partition,
                            stale).fetch(keyFrom, keyTo)) {
                        it.forEachRemaining(kv -> addWindowed(rows, kv, partition, from, to));
                    }
                }
                default -> {
                    try (KeyValueIterator<String, Accumulator> it = store(
                            QueryableStoreTypes.<String, Accumulator>keyValueStore(), partition,
                            stale).range(keyFrom, keyTo)) {
                        it.forEachRemaining(kv -> rows.add(row(kv.key, partition, null, null,
                                kv.value)));
                    }
                }
            }
        }
        return rows;
    }

    /** The store's partitions this instance holds: active ones, and standbys when stale. */
    public List<Integer> partitions(boolean stale) {
        List<Integer> found = new ArrayList<>();
        for (StreamsMetadata meta : streams.streamsMetadataForStore(TopologyFactory.STORE)) {
            if (!meta.hostInfo().equals(self)) {
                continue;
            }
            meta.topicPartitions().stream().filter(tp -> tp.topic().equals(repartitionTopic))
                    .forEach(tp -> found.add(tp.partition()));
            if (stale) {
                meta.standbyTopicPartitions().stream()
                        .filter(tp -> tp.topic().equals(repartitionTopic))
                        .forEach(tp -> found.add(tp.partition()));
            }
        }
        found.sort(null);
        return found;
    }

    private static boolean inRange(String key, String from, String to) {
        return (from == null || key.compareTo(from) >= 0) && (to == null || key.compareTo(to) <= 0);
    }

    private <T> T store(QueryableStoreType<T> type, int partition, boolean stale) {
        StoreQueryParameters<T> params = StoreQueryParameters
                .fromNameAndType(TopologyFactory.STORE, type).withPartition(partition);
        return streams.store(stale ? params.enableStaleStores() : params);
    }

    private void addWindowed(ArrayNode rows, KeyValue<Windowed<String>, Accumulator> kv,
                             int partition, long from, long to) {
        long start = kv.key.window().start();
        if (start >= from && start <= to) {
            rows.add(row(kv.key.key(), partition, start, kv.key.window().end(), kv.value));
        }
    }

    private ObjectNode row(String key, int partition, Long start, Long end, Accumulator value) {
        ObjectNode row = JSON.createObjectNode().put("key", key).put("partition", partition);
        if (start != null) {
            row.put("window_start", start).put("window_end", end);
        }
        row.setAll(value.values(spec.aggregates));
        return row;
    }
}
