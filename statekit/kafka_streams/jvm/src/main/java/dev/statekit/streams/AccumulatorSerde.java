package dev.statekit.streams;

import java.nio.ByteBuffer;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;

/**
 * An Accumulator in the store and its changelog: big-endian, rows (long), then per aggregate
 * count (long), sum, min, max (doubles): 8 + 32 bytes an aggregate.
 */
public final class AccumulatorSerde {
    private AccumulatorSerde() {}

    public static Serde<Accumulator> serde() {
        Serializer<Accumulator> serializer = (topic, acc) -> {
            if (acc == null) {
                return null;
            }
            int n = acc.count.length;
            ByteBuffer out = ByteBuffer.allocate(8 + 32 * n).putLong(acc.rows);
            for (int i = 0; i < n; i++) {
                out.putLong(acc.count[i]).putDouble(acc.sum[i]).putDouble(acc.min[i])
                        .putDouble(acc.max[i]);
            }
            return out.array();
        };
        Deserializer<Accumulator> deserializer = (topic, bytes) -> {
            if (bytes == null) {
                return null;
            }
            ByteBuffer in = ByteBuffer.wrap(bytes);
            int n = (bytes.length - 8) / 32;
            Accumulator acc = new Accumulator(n);
            acc.rows = in.getLong();
            for (int i = 0; i < n; i++) {
                acc.count[i] = in.getLong();
                acc.sum[i] = in.getDouble();
                acc.min[i] = in.getDouble();
                acc.max[i] = in.getDouble();
            }
            return acc;
        };
        return Serdes.serdeFrom(serializer, deserializer);
    }
}
