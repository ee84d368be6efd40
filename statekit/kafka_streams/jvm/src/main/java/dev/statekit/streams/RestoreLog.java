package dev.statekit.streams;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.processor.StateRestoreListener;

/**
 * Every restore of a store from its changelog this instance ran (Kafka Streams' global
 * StateRestoreListener): per (store, changelog partition) the offsets it restored from and to,
 * the records restored and the wall milliseconds from onRestoreStart to onRestoreEnd (or to
 * now while it runs; -1 when suspended before its end). Served as {@code /restores}.
 */
public final class RestoreLog implements StateRestoreListener {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** One restore of one store partition. */
    private static final class Restore {
        final String store;
        final int partition;
        final String topic;
        final long startOffset;
        final long endOffset;
        final long startedNanos = System.nanoTime();
        final long startedMs = System.currentTimeMillis();
        volatile long records;
        volatile long endedNanos = -1;
        volatile String state = "restoring";

        Restore(String store, TopicPartition tp, long startOffset, long endOffset) {
            this.store = store;
            this.partition = tp.partition();
            this.topic = tp.topic();
            this.startOffset = startOffset;
            this.endOffset = endOffset;
        }
    }

    private final List<Restore> done = new ArrayList<>();
    private final Map<String, Restore> running = new ConcurrentHashMap<>();

    private static String id(TopicPartition tp, String store) {
        return store + "/" + tp.topic() + "/" + tp.partition();
    }

    @Override
    public void onRestoreStart(TopicPartition tp, String store, long startOffset, long endOffset) {
        running.put(id(tp, store), new Restore(store, tp, startOffset, endOffset));
    }

    @Override
    public void onBatchRestored(TopicPartition tp, String store, long batchEndOffset,
                                long numRestored) {
        Restore restore = running.get(id(tp, store));
        if (restore != null) {
            restore.records += numRestored;
        }
    }

    @Override
    public void onRestoreEnd(TopicPartition tp, String store, long totalRestored) {
        finish(tp, store, totalRestored, "done");
    }

    @Override
    public void onRestoreSuspended(TopicPartition tp, String store, long totalRestored) {
        finish(tp, store, totalRestored, "suspended");
    }

    private void finish(TopicPartition tp, String store, long total, String state) {
        Restore restore = running.remove(id(tp, store));
        if (restore == null) {
            return;
        }
        restore.records = total;
        restore.endedNanos = System.nanoTime();
        restore.state = state;
        synchronized (done) {
            done.add(restore);
        }
    }

    /** Every restore, finished ones first, in the order they ended. */
    public ArrayNode toJson() {
        List<Restore> all;
        synchronized (done) {
            all = new ArrayList<>(done);
        }
        all.addAll(running.values());
        ArrayNode rows = JSON.createArrayNode();
        for (Restore r : all) {
            long end = r.endedNanos < 0 ? System.nanoTime() : r.endedNanos;
            rows.addObject().put("store", r.store).put("topic", r.topic)
                    .put("partition", r.partition).put("start_offset", r.startOffset)
                    .put("end_offset", r.endOffset).put("records", r.records)
                    .put("started_ms", r.startedMs).put("ms", (end - r.startedNanos) / 1e6)
                    .put("state", r.state);
        }
        return rows;
    }
}
