/* ReadPathModel.java — what the two stream peers of perf/run_stream.sh (Flink's ReadPath and
 * Kafka Streams' ReadPathStreams) share, so that both compute newsflow's read path the same way:
 * the window, pane and EMA constants, the topic names bench_readpath gives, the article topic
 * vectors of topics.jsonl, one interest update (as newsflow's interest.h does it), and the
 * output lines perf/stream/compare_stream.py reads. Compiled into each peer (both poms add this
 * directory as a source root); plain Jackson, as neither engine's shaded copy is the other's. */
package newsflow.peer;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.management.OperatingSystemMXBean;
import java.io.BufferedReader;
import java.io.FileReader;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

final class ReadPathModel {
    static final double ALPHA = 0.1, GAMMA = 0.95, MS_PER_DAY = 86400000.0;
    static final long WINDOW_MS = 3600000, SLIDE_MS = 30000, LATENESS_MS = 5000;
    static final int TOP_K = 50, TOPICS = 20;
    /* The names bench_readpath gives topics 0..19 (as a taxonomy would). */
    static final String[] NAMES = {"politics", "world", "business", "economy", "markets",
        "technology", "science", "health", "sports", "entertain", "culture", "environ",
        "education", "crime", "travel", "life", "energy", "autos", "religion", "local"};

    private ReadPathModel() {}

    static long cpuNs() {
        return ((OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
    }

    /* Every article's topic vector, read once per JVM (every task knows every article, as every
     * newsflow shard does from dedup's broadcasts). */
    private static volatile Map<String, double[]> topics;

    static synchronized Map<String, double[]> loadTopics(String path) throws IOException {
        if (topics != null)
            return topics;
        Map<String, double[]> m = new HashMap<>();
        ObjectMapper json = new ObjectMapper();
        try (BufferedReader r = new BufferedReader(new FileReader(path))) {
            for (String line; (line = r.readLine()) != null;) {
                JsonNode n = json.readTree(line);
                double[] v = new double[TOPICS];
                for (JsonNode tw : n.get("topics"))
                    v[tw.get(0).asInt()] = tw.get(1).asDouble();
                m.put(n.get("article_id").asText(), v);
            }
        }
        return topics = m;
    }

    /* One read of an article with topic weights w at event time ts by a reader whose vector is v
     * (version 0: none yet), last updated at `updated`: v decays by GAMMA per day since, takes
     * ALPHA * w and is L2-normalized, in place. Returns the new updated time (never backwards). */
    static long emaUpdate(double[] v, long version, long updated, long ts, double[] w) {
        double days = version == 0 ? 0 : Math.max(0, ts - updated) / MS_PER_DAY;
        double decay = Math.pow(GAMMA, days), norm = 0;
        for (int t = 0; t < TOPICS; t++) {
            v[t] = decay * v[t] + ALPHA * w[t];
            norm += v[t] * v[t];
        }
        norm = Math.sqrt(norm);
        if (norm > 0)
            for (int t = 0; t < TOPICS; t++)
                v[t] /= norm;
        return version == 0 ? ts : Math.max(updated, ts);
    }

    /* An interest-updates line: {"user_id":..,"version":..,"vector":{name:weight,..},"updated_ms":..}. */
    static String interestLine(String user, long version, double[] v, long updated) {
        StringBuilder b = new StringBuilder(160);
        b.append("{\"user_id\":\"").append(user).append("\",\"version\":").append(version)
            .append(",\"vector\":{");
        boolean first = true;
        for (int t = 0; t < TOPICS; t++)
            if (v[t] != 0) {
                b.append(first ? "\"" : ",\"").append(NAMES[t]).append("\":").append(v[t]);
                first = false;
            }
        return b.append("},\"updated_ms\":").append(updated).append('}').toString();
    }

    /* A trending line for the window ending at `end`: the top TOP_K of (article_id, count),
     * count descending then article_id ascending (sorts `all`). */
    static String trendingLine(long end, List<Map.Entry<String, Long>> all) {
        all.sort((a, b) -> a.getValue().longValue() != b.getValue().longValue()
                ? Long.compare(b.getValue(), a.getValue())
                : a.getKey().compareTo(b.getKey()));
        StringBuilder b = new StringBuilder(4096);
        b.append("{\"window_end_ms\":").append(end).append(",\"items\":[");
        for (int i = 0; i < Math.min(TOP_K, all.size()); i++)
            b.append(i > 0 ? ",{\"article_id\":\"" : "{\"article_id\":\"")
                .append(all.get(i).getKey()).append("\",\"score\":").append(all.get(i).getValue())
                .append('}');
        return b.append("]}").toString();
    }
}
