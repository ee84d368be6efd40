package dev.statekit.streams;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.state.HostInfo;

/**
 * One instance of the reference application: {@code java -cp <jars> dev.statekit.streams.Main
 * config.json}, the file written by statekit.kafka_streams.launch: application_id,
 * bootstrap_servers, topic, state_dir, port, cache_max_bytes, standbys, commit_interval_ms,
 * session_timeout_ms, spec, and streams_config (any other Kafka Streams settings). A problem is one line on stderr starting "statekit-streams: "
 * and exit status 2 (bad configuration) or 3 (the stream thread failed).
 */
public final class Main {
    public static void main(String[] args) {
        try {
            run(new ObjectMapper().readTree(new File(args[0])));
        } catch (Exception e) {
            fail(2, "cannot start: " + e);
        }
    }

    private static void run(JsonNode config) throws Exception {
        Spec spec = new Spec(config.get("spec"));
        String applicationId = config.get("application_id").asText();
        HostInfo self = new HostInfo("127.0.0.1", config.get("port").asInt());
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, config.get("bootstrap_servers").asText());
        props.put(StreamsConfig.STATE_DIR_CONFIG, config.get("state_dir").asText());
        props.put(StreamsConfig.APPLICATION_SERVER_CONFIG, QueryServer.name(self));
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG,
                config.get("cache_max_bytes").asLong());
        props.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, config.get("standbys").asInt());
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, config.get("commit_interval_ms").asLong());
        props.put(StreamsConfig.consumerPrefix("session.timeout.ms"),
                config.get("session_timeout_ms").asInt());
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        config.path("streams_config").fields()
                .forEachRemaining(setting -> props.put(setting.getKey(), setting.getValue().asText()));

        KafkaStreams streams = new KafkaStreams(
                TopologyFactory.build(config.get("topic").asText(), spec), props);
        streams.setUncaughtExceptionHandler(error -> {
            fail(3, "the stream thread failed: " + rootCause(error));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        RestoreLog restores = new RestoreLog();
        streams.setGlobalStateRestoreListener(restores);
        QueryServer server = new QueryServer(streams,
                new LocalStore(streams, spec, self, applicationId), restores, self);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            server.stop();
            streams.close(Duration.ofSeconds(10));
        }));
        server.start();
        streams.start();
    }

    private static String rootCause(Throwable error) {
        Throwable cause = error;
        while (cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause.getClass().getSimpleName() + ": " + cause.getMessage();
    }

    private static void fail(int status, String message) {
        System.err.println("statekit-streams: " + message);
        System.err.flush();
        Runtime.getRuntime().halt(status);
    }
}
