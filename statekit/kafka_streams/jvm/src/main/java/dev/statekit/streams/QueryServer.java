package dev.statekit.streams;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyQueryMetadata;
import org.apache.kafka.streams.StreamsMetadata;
import org.apache.kafka.streams.errors.InvalidStateStoreException;
import org.apache.kafka.streams.errors.UnknownStateStoreException;
import org.apache.kafka.streams.state.HostInfo;

/**
 * Interactive queries over HTTP on 127.0.0.1 (JSON answers):
 * <ul>
 * <li>{@code /key?key=K[&from=ms&to=ms]}: K's rows, routed as Kafka Streams says
 *     (queryMetadataForKey): the active host, else each standby host (enableStaleStores);
 *     the answer names the partition, who served it and in which role;</li>
 * <li>{@code /range[?from=K1&to=K2&time_from=ms&time_to=ms]}: every row in the key range,
 *     gathered from every instance's active partitions;</li>
 * <li>{@code /metadata}: each instance and the partitions it holds, active and standby;</li>
 * <li>{@code /progress}: the client's state and its metrics summed by name;</li>
 * <li>{@code /restores}: every restore of a store from its changelog this instance ran
 *     (RestoreLog);</li>
 * <li>{@code /health}: the client's state.</li>
 * </ul>
 * {@code local=active} or {@code local=stale} on /key and /range answers from this instance
 * alone (what the routing sends to another instance).
 */
public final class QueryServer {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final List<String> METRICS = List.of("process-total", "process-rate",
            "commit-total", "dropped-records-total", "records-consumed-total",
            "records-lag-max", "poll-total");
    private final KafkaStreams streams;
    private final LocalStore store;
    private final RestoreLog restores;
    private final HostInfo self;
    private final HttpServer server;
    private final HttpClient client = HttpClient.newBuilder()
            .connectTimeout(Duration.ofSeconds(2)).build();

    public QueryServer(KafkaStreams streams, LocalStore store, RestoreLog restores, HostInfo self)
            throws IOException {
        this.streams = streams;
        this.store = store;
        this.restores = restores;
        this.self = self;
        server = HttpServer.create(new InetSocketAddress(self.host(), self.port()), 0);
        server.setExecutor(Executors.newFixedThreadPool(4));
        route("/health", params -> health());
        route("/key", this::byKey);
        route("/range", this::range);
        route("/metadata", params -> metadata());
        route("/progress", params -> progress());
        route("/restores", params -> (ObjectNode) JSON.createObjectNode()
                .set("restores", restores.toJson()));
    }

    public void start() {
        server.start();
    }

    public void stop() {
        server.stop(0);
    }

    private interface Handler {
        ObjectNode answer(Map<String, String> params) throws Exception;
    }

    private void route(String path, Handler handler) {
        server.createContext(path, exchange -> {
            int status = 200;
            ObjectNode body;
            try {
                body = handler.answer(params(exchange));
            } catch (Exception e) {
                status = e instanceof IllegalArgumentException ? 400 : 503;
                body = JSON.createObjectNode().put("error", String.valueOf(e.getMessage()))
                        .put("kind", e.getClass().getSimpleName())
                        .put("retriable", retriable(e));
            }
            byte[] bytes = JSON.writeValueAsBytes(body.put("instance", name(self)));
            exchange.getResponseHeaders().set("Content-Type", "application/json");
            exchange.sendResponseHeaders(status, bytes.length);
            exchange.getResponseBody().write(bytes);
            exchange.close();
        });
    }

    /**
     * A store that is moving (a rebalance, an instance that has not caught up): Kafka Streams'
     * answer is to ask again, so the caller is told it may.
     */
    static final class Rebalancing extends RuntimeException {
        Rebalancing(String message) {
            super(message);
        }
    }

    /** A moving store, or an instance the metadata still names that does not answer. */
    private static boolean retriable(Exception e) {
        return e instanceof Rebalancing || e instanceof IOException
                || (e instanceof InvalidStateStoreException
                    && !(e instanceof UnknownStateStoreException));
    }

    private ObjectNode health() {
        return JSON.createObjectNode().put("state", streams.state().name());
    }

    private ObjectNode byKey(Map<String, String> params) throws Exception {
        String key = params.get("key");
        if (key == null) {
            throw new IllegalArgumentException("/key needs ?key=");
        }
        long from = longParam(params, "from", 0);
        long to = longParam(params, "to", Long.MAX_VALUE);
        KeyQueryMetadata where = streams.queryMetadataForKey(TopologyFactory.STORE, key,
                Serdes.String().serializer());
        if (where == null || where.equals(KeyQueryMetadata.NOT_AVAILABLE)) {
            throw new Rebalancing("no metadata for key " + key + " yet (rebalancing)");
        }
        int partition = where.partition();
        String local = params.get("local");
        if (local != null) {
            return JSON.createObjectNode().put("key", key).put("partition", partition)
                    .put("served_by", name(self)).put("role", local)
                    .set("rows", store.byKey(key, partition, local.equals("stale"), from, to));
        }
        List<HostInfo> hosts = new ArrayList<>();
        hosts.add(where.activeHost());
        hosts.addAll(where.standbyHosts());
        ArrayNode failures = JSON.createArrayNode();
        boolean allRetriable = true;
        for (HostInfo host : hosts) {
            String role = host.equals(where.activeHost()) ? "active" : "stale";
            try {
                ObjectNode answer = host.equals(self)
                        ? byKey(Map.of("key", key, "from", "" + from, "to", "" + to,
                                       "local", role))
                        : forward(host, "/key?key=" + encode(key) + "&from=" + from + "&to=" + to
                                        + "&local=" + role);
                answer.put("active", name(where.activeHost())).put("routed_from", name(self));
                answer.set("standbys", hostNames(where.standbyHosts()));
                answer.set("failed", failures);
                return answer;
            } catch (Exception e) {
                failures.add(name(host) + ": " + e.getMessage());
                allRetriable &= retriable(e);
            }
        }
        String message = "no instance holding partition " + partition + " answered: " + failures;
        throw allRetriable ? new Rebalancing(message) : new IllegalStateException(message);
    }

    private ObjectNode range(Map<String, String> params) throws Exception {
        String from = params.get("from");
        String to = params.get("to");
        long timeFrom = longParam(params, "time_from", 0);
        long timeTo = longParam(params, "time_to", Long.MAX_VALUE);
        String local = params.get("local");
        if (local != null) {
            return (ObjectNode) JSON.createObjectNode().put("role", local)
                    .set("rows", store.range(from, to, local.equals("stale"), timeFrom, timeTo));
        }
        ArrayNode rows = JSON.createArrayNode();
        ArrayNode answered = JSON.createArrayNode();
        for (StreamsMetadata meta : streams.metadataForAllStreamsClients()) {
            HostInfo host = meta.hostInfo();
            ObjectNode part = host.equals(self)
                    ? (ObjectNode) JSON.createObjectNode()
                            .set("rows", store.range(from, to, false, timeFrom, timeTo))
                    : forward(host, "/range?local=active&time_from=" + timeFrom + "&time_to="
                              + timeTo + (from == null ? "" : "&from=" + encode(from))
                              + (to == null ? "" : "&to=" + encode(to)));
            part.get("rows").forEach(rows::add);
            answered.add(name(host));
        }
        ObjectNode out = JSON.createObjectNode();
        out.set("instances", answered);
        out.set("rows", rows);
        return out;
    }

    private ObjectNode metadata() {
        ArrayNode instances = JSON.createArrayNode();
        for (StreamsMetadata meta : streams.metadataForAllStreamsClients()) {
            ObjectNode one = instances.addObject().put("instance", name(meta.hostInfo()));
            ArrayNode active = one.putArray("active");
            meta.topicPartitions().forEach(tp -> active.add(tp.topic() + "-" + tp.partition()));
            ArrayNode standby = one.putArray("standby");
            meta.standbyTopicPartitions()
                    .forEach(tp -> standby.add(tp.topic() + "-" + tp.partition()));
        }
        return (ObjectNode) JSON.createObjectNode().set("instances", instances);
    }

    private ObjectNode progress() {
        Map<String, Double> sums = new TreeMap<>();
        for (Map.Entry<org.apache.kafka.common.MetricName, ? extends Metric> entry
                : streams.metrics().entrySet()) {
            String name = entry.getKey().name();
            Map<String, String> tags = entry.getKey().tags();
            // the main consumers' client-level figures: not the restore consumer's, not the
            // per-topic or per-partition copies of the same counts
            boolean restore = tags.getOrDefault("client-id", "").contains("restore-consumer")
                    || tags.containsKey("topic") || tags.containsKey("partition");
            Object value = entry.getValue().metricValue();
            if (METRICS.contains(name) && !restore && value instanceof Number number
                    && !Double.isNaN(number.doubleValue())) {
                boolean max = name.endsWith("-max");
                sums.merge(name, number.doubleValue(), max ? Math::max : Double::sum);
            }
        }
        ObjectNode out = JSON.createObjectNode().put("state", streams.state().name());
        out.set("metrics", JSON.valueToTree(sums));
        return out;
    }

    private ObjectNode forward(HostInfo host, String pathAndQuery) throws Exception {
        HttpRequest request = HttpRequest.newBuilder(
                URI.create("http://" + host.host() + ":" + host.port() + pathAndQuery))
                .timeout(Duration.ofSeconds(10)).GET().build();
        HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
        JsonNode body = JSON.readTree(response.body());
        if (response.statusCode() != 200) {
            String error = body.path("error").asText(response.body());
            throw body.path("retriable").asBoolean(false) ? new Rebalancing(error)
                    : new IllegalStateException(error);
        }
        return (ObjectNode) body;
    }

    private static Map<String, String> params(HttpExchange exchange) {
        Map<String, String> params = new HashMap<>();
        String query = exchange.getRequestURI().getRawQuery();
        if (query != null) {
            for (String pair : query.split("&")) {
                int eq = pair.indexOf('=');
                if (eq > 0) {
                    params.put(URLDecoder.decode(pair.substring(0, eq), StandardCharsets.UTF_8),
                            URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8));
                }
            }
        }
        return params;
    }

    private static long longParam(Map<String, String> params, String name, long otherwise) {
        String value = params.get(name);
        try {
            return value == null ? otherwise : Long.parseLong(value);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + " must be epoch milliseconds, not " + value);
        }
    }

    private static String encode(String text) {
        return URLEncoder.encode(text, StandardCharsets.UTF_8);
    }

    private static ArrayNode hostNames(Iterable<HostInfo> hosts) {
        ArrayNode names = JSON.createArrayNode();
        hosts.forEach(host -> names.add(name(host)));
        return names;
    }

    static String name(HostInfo host) {
        return host.host() + ":" + host.port();
    }
}
