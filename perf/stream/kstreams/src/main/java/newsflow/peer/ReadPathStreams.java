/* ReadPathStreams.java — newsflow's read path as a Kafka Streams application, through the real
 * broker (scripts/kafka.sh): the second stream peer of perf/run_stream.sh (issue 22). The same
 * input as the Flink peer (bench_readpath --dump's events.jsonl and topics.jsonl), the same
 * semantics, outputs in the files perf/stream/compare_stream.py compares with newsflow's.
 *
 *   load   produces events.jsonl to topic ks-ID-read-events (P partitions, keyed by user_id, the
 *          record timestamp the event's ts), then one end marker per partition (ts 2 h after the
 *          last event: it moves stream time past every window; no state takes it in).
 *          --topic T: to the existing topic T instead (the newsflow job's read-events, created by
 *          `newsflow topics create`: perf/run_stream.sh's broker_eos pair), its retention made
 *          unlimited first, without end markers (the job would take them for undecodable events).
 *   run    the application (processor API, RocksDB stores with changelogs, exactly_once_v2):
 *            reader (one task per input partition): event-id dedup, the (user, article, session)
 *              seen set and the interest EMA (as in newsflow's interest.h) -> ks-ID-interest; every
 *              counted read -> ks-ID-reads (one partition, keyed by article_id)
 *            trending (one task: the ranking is global, as newsflow's merger is): 30 s panes per
 *              article in a store; a window (1 h, ending at a multiple of 30 s) is ranked once the
 *              watermark passed its end. Kafka Streams has no watermarks across a repartition
 *              (its stream time is the largest timestamp a task saw, and the reader tasks drift
 *              apart by far more than any grace one would choose: tens of minutes of event time
 *              here), so each reader task sends its partition's progress as a marker record every
 *              30 s of event time and the trending task takes the least, less 5 s, as newsflow
 *              does. A read behind it is counted as late and dropped (the comparison then fails
 *              and says so) -> ks-ID-trending, top 50 by count desc, article_id asc
 *          until every end marker went through both; then reads the two output topics back
 *          (read_committed) into DIR/kstreams-{interest,trending}-0.jsonl and prints one JSON
 *          line {"bench":"stream.kstreams",...}. The clock runs from the first record the reader
 *          takes to the last end marker through the trending task.
 *
 *   java ... ReadPathStreams load --id ID --bootstrap B --events F --partitions P [--topic T]
 *   java ... ReadPathStreams run --id ID --bootstrap B --topics F --out DIR --state DIR --threads T
 *        --partitions P --last-window-end MS [--commit-ms C] */
package newsflow.peer;

import static newsflow.peer.ReadPathModel.*;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.FileReader;
import java.io.FileWriter;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

public final class ReadPathStreams {
    static final String END = "__end__", MARK = "__mark__";
    /* Topics of one run (--id ID: ks-ID-read-events, ...), so that runs do not share them. */
    static String IN, READS, INTEREST, TRENDING;

    static void names(String[] args) {
        String id = arg(args, "--id", "0");
        IN = "ks-" + id + "-read-events";
        READS = "ks-" + id + "-reads";
        INTEREST = "ks-" + id + "-interest";
        TRENDING = "ks-" + id + "-trending";
    }

    static final AtomicLong FIRST_NS = new AtomicLong(), FIRST_CPU_NS = new AtomicLong(),
                            DONE_NS = new AtomicLong(), EVENTS = new AtomicLong(),
                            ID_DUPS = new AtomicLong(), SEEN_DUPS = new AtomicLong(),
                            UPDATES = new AtomicLong(), LATE = new AtomicLong(),
                            WINDOWS = new AtomicLong(), READER_ENDS = new AtomicLong();

    /* interest state: version, updated, 20 weights */
    static byte[] packInterest(long version, long updated, double[] v) {
        ByteBuffer b = ByteBuffer.allocate(16 + 8 * TOPICS);
        b.putLong(version).putLong(updated);
        for (double x : v)
            b.putDouble(x);
        return b.array();
    }

    static final class Reader implements Processor<String, String, String, String> {
        private final String topicsPath;
        private ProcessorContext<String, String> ctx;
        private KeyValueStore<String, Long> ids, seen;
        private KeyValueStore<String, byte[]> interest;
        private Map<String, double[]> table;
        private final ObjectMapper json = new ObjectMapper();
        private long mark = Long.MIN_VALUE;

        Reader(String topicsPath) {
            this.topicsPath = topicsPath;
        }

        @Override
        public void init(ProcessorContext<String, String> c) {
            ctx = c;
            ids = c.getStateStore("event-ids");
            seen = c.getStateStore("seen");
            interest = c.getStateStore("interest");
            try {
                table = loadTopics(topicsPath);
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        }

        @Override
        public void process(Record<String, String> r) {
            if (FIRST_NS.get() == 0 && FIRST_NS.compareAndSet(0, System.nanoTime()))
                FIRST_CPU_NS.set(cpuNs());
            int part = ctx.recordMetadata().map(m -> m.partition()).orElse(0);
            if (END.equals(r.key())) { /* to the trending task, through ks-reads */
                READER_ENDS.incrementAndGet();
                ctx.forward(new Record<>(END, Integer.toString(part), r.timestamp()), "to-reads");
                return;
            }
            /* This partition's progress in event time, each time it enters a new 30 s pane: the
             * trending task's watermark is the least of its input partitions' (as newsflow's and
             * Flink's are), which Kafka Streams does not keep across a repartition by itself. */
            if (Math.floorDiv(r.timestamp(), SLIDE_MS) > Math.floorDiv(mark, SLIDE_MS)) {
                mark = r.timestamp();
                ctx.forward(new Record<>(MARK, Integer.toString(part), mark), "to-reads");
            }
            JsonNode n;
            try {
                n = json.readTree(r.value());
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
            EVENTS.incrementAndGet();
            String user = n.get("user_id").asText(), article = n.get("article_id").asText();
            String eventId = n.path("event_id").asText(""), session = n.path("session_id").asText("");
            long ts = n.get("ts").asLong();
            if (!eventId.isEmpty()) {
                if (ids.get(eventId) != null) {
                    ID_DUPS.incrementAndGet();
                    return;
                }
                ids.put(eventId, ts);
            }
            ctx.forward(new Record<>(article, "", ts), "to-reads");
            double[] w = table.get(article);
            if (w == null)
                return;
            String sk = user + '\u0000' + article + '\u0000' + session;
            if (seen.get(sk) != null) {
                SEEN_DUPS.incrementAndGet();
                return;
            }
            seen.put(sk, ts);
            byte[] st = interest.get(user);
            long version = 0, updated = 0;
            double[] v = new double[TOPICS];
            if (st != null) {
                ByteBuffer b = ByteBuffer.wrap(st);
                version = b.getLong();
                updated = b.getLong();
                for (int t = 0; t < TOPICS; t++)
                    v[t] = b.getDouble();
            }
            updated = emaUpdate(v, version, updated, ts, w);
            version++;
            interest.put(user, packInterest(version, updated, v));
            ctx.forward(new Record<>(user, interestLine(user, version, v, updated), ts),
                "to-interest");
            UPDATES.incrementAndGet();
        }
    }

    /* The one trending task. Store panes: article -> (pane end, count) pairs that can still be in
     * a window to come; store meta: "next" (the next window end to rank), "stream" (the watermark),
     * "mark<i>" (input partition i's progress),
     * "ends" (end markers seen): what a restarted task needs to go on. */
    static final class Trending implements Processor<String, String, String, String> {
        private final long lastEnd;
        private final int partitions;
        private ProcessorContext<String, String> ctx;
        private KeyValueStore<String, byte[]> panes;
        private KeyValueStore<String, Long> meta;

        Trending(long lastEnd, int partitions) {
            this.lastEnd = lastEnd;
            this.partitions = partitions;
        }

        @Override
        public void init(ProcessorContext<String, String> c) {
            ctx = c;
            panes = c.getStateStore("panes");
            meta = c.getStateStore("trend-meta");
            next = get("next", Long.MAX_VALUE);
            stream = get("stream", Long.MIN_VALUE);
            ends = get("ends", 0);
            started = get("started", 0) == 1;
            marks = new long[partitions];
            for (int i = 0; i < partitions; i++)
                marks[i] = get("mark" + i, Long.MIN_VALUE);
        }

        /* meta's values, kept in fields too (a store read per record is what a cache avoids) */
        private long next, stream, ends;
        private boolean started;
        private long[] marks;

        long get(String k, long dflt) {
            Long v = meta.get(k);
            return v == null ? dflt : v;
        }

        @Override
        public void process(Record<String, String> r) {
            long ts = r.timestamp();
            if (END.equals(r.key()) || MARK.equals(r.key())) {
                int part = Integer.parseInt(r.value());
                if (END.equals(r.key()))
                    meta.put("ends", ++ends);
                if (ts > marks[part])
                    meta.put("mark" + part, marks[part] = ts);
            } else {
                long paneEnd = Math.floorDiv(ts, SLIDE_MS) * SLIDE_MS + SLIDE_MS;
                if (started && paneEnd < next) {
                    LATE.incrementAndGet(); /* its window (the one ending at paneEnd) was ranked */
                } else {
                    if (!started && paneEnd < next)
                        meta.put("next", next = paneEnd);
                    byte[] old = panes.get(r.key());
                    ByteBuffer b = ByteBuffer.allocate((old == null ? 0 : old.length) + 16);
                    boolean found = false;
                    if (old != null) {
                        ByteBuffer o = ByteBuffer.wrap(old);
                        while (o.hasRemaining()) {
                            long e = o.getLong(), n = o.getLong();
                            if (e == paneEnd) {
                                n++;
                                found = true;
                            }
                            b.putLong(e).putLong(n);
                        }
                    }
                    if (!found)
                        b.putLong(paneEnd).putLong(1);
                    panes.put(r.key(), java.util.Arrays.copyOf(b.array(), b.position()));
                }
            }
            /* the watermark: the least partition's progress, less newsflow's 5 s of lateness */
            long wm = Long.MAX_VALUE;
            for (long m : marks)
                wm = Math.min(wm, m);
            if (wm != Long.MIN_VALUE && wm - LATENESS_MS > stream)
                meta.put("stream", stream = wm - LATENESS_MS);
            while (next != Long.MAX_VALUE && next <= lastEnd && next <= stream) {
                rank(next);
                if (!started)
                    meta.put("started", 1L);
                started = true;
                meta.put("next", next += SLIDE_MS);
            }
            if (ends == partitions && (next > lastEnd || next == Long.MAX_VALUE)
                && DONE_NS.get() == 0)
                DONE_NS.set(System.nanoTime());
        }

        private void rank(long end) {
            List<Map.Entry<String, Long>> all = new ArrayList<>();
            List<KeyValue<String, byte[]>> rewrite = new ArrayList<>();
            try (KeyValueIterator<String, byte[]> it = panes.all()) {
                while (it.hasNext()) {
                    KeyValue<String, byte[]> kv = it.next();
                    ByteBuffer o = ByteBuffer.wrap(kv.value);
                    ByteBuffer keep = ByteBuffer.allocate(kv.value.length);
                    long sum = 0;
                    while (o.hasRemaining()) {
                        long e = o.getLong(), n = o.getLong();
                        if (e > end - WINDOW_MS && e <= end)
                            sum += n;
                        if (e > end + SLIDE_MS - WINDOW_MS)
                            keep.putLong(e).putLong(n);
                    }
                    if (sum > 0)
                        all.add(Map.entry(kv.key, sum));
                    if (keep.position() != kv.value.length)
                        rewrite.add(KeyValue.pair(kv.key, keep.position() == 0
                                ? null : java.util.Arrays.copyOf(keep.array(), keep.position())));
                }
            }
            for (KeyValue<String, byte[]> kv : rewrite)
                panes.put(kv.key, kv.value);
            ctx.forward(new Record<>(Long.toString(end), trendingLine(end, all), end));
            WINDOWS.incrementAndGet();
        }
    }

    static String arg(String[] args, String name, String dflt) {
        for (int i = 1; i + 1 < args.length; i++)
            if (args[i].equals(name))
                return args[i + 1];
        if (dflt == null) {
            System.err.println("ReadPathStreams: missing " + name + " (see the file's comment)");
            System.exit(2);
        }
        return dflt;
    }

    static void load(String[] args) throws Exception {
        String bootstrap = arg(args, "--bootstrap", null), events = arg(args, "--events", null);
        int p = Integer.parseInt(arg(args, "--partitions", "4"));
        String to = arg(args, "--topic", "");
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            if (!to.isEmpty()) { /* the job's topic: kept forever, as below */
                var res = new org.apache.kafka.common.config.ConfigResource(
                    org.apache.kafka.common.config.ConfigResource.Type.TOPIC, to);
                var op = new org.apache.kafka.clients.admin.AlterConfigOp(
                    new org.apache.kafka.clients.admin.ConfigEntry("retention.ms", "-1"),
                    org.apache.kafka.clients.admin.AlterConfigOp.OpType.SET);
                admin.incrementalAlterConfigs(Map.of(res, List.of(op))).all().get();
            } else {
                /* The events' timestamps are their event time, in the past: with the broker's
                 * default retention (7 days, by record time) its next retention check would
                 * delete them under the running application. Kept forever here (the run deletes
                 * the broker). */
                Map<String, String> keep = Map.of("retention.ms", "-1");
                admin.createTopics(List.of(new NewTopic(IN, p, (short) 1).configs(keep),
                                       new NewTopic(READS, 1, (short) 1).configs(keep),
                                       new NewTopic(INTEREST, p, (short) 1).configs(keep),
                                       new NewTopic(TRENDING, 1, (short) 1).configs(keep)))
                    .all()
                    .get();
            }
        }
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, 20);
        pp.put(ProducerConfig.BATCH_SIZE_CONFIG, 262144);
        pp.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        ObjectMapper json = new ObjectMapper();
        long n = 0, max = Long.MIN_VALUE;
        try (KafkaProducer<String, String> prod =
                 new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer());
             BufferedReader r = new BufferedReader(new FileReader(events))) {
            for (String line; (line = r.readLine()) != null; n++) {
                JsonNode e = json.readTree(line);
                long ts = e.get("ts").asLong();
                max = Math.max(max, ts);
                prod.send(new ProducerRecord<>(to.isEmpty() ? IN : to, null, ts,
                                               e.get("user_id").asText(), line));
            }
            for (int i = 0; to.isEmpty() && i < p; i++)
                prod.send(new ProducerRecord<>(IN, i, max + 2 * 3600000L, END, ""));
            prod.flush();
        }
        System.err.printf("ReadPathStreams: %d events in %s%n", n, to.isEmpty() ? IN : to);
    }

    static void dump(String bootstrap, String topic, String path) throws IOException {
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 5000);
        try (KafkaConsumer<String, String> c =
                 new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer());
             BufferedWriter w = new BufferedWriter(new FileWriter(path), 1 << 20)) {
            List<org.apache.kafka.common.TopicPartition> tps = new ArrayList<>();
            for (var pi : c.partitionsFor(topic))
                tps.add(new org.apache.kafka.common.TopicPartition(topic, pi.partition()));
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<org.apache.kafka.common.TopicPartition, Long> end = c.endOffsets(tps);
            for (;;) {
                boolean done = true;
                for (var tp : tps)
                    done &= c.position(tp) >= end.get(tp);
                if (done)
                    break;
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    w.write(r.value());
                    w.write('\n');
                }
            }
        }
    }

    static void run(String[] args) throws Exception {
        String bootstrap = arg(args, "--bootstrap", null), topicsPath = arg(args, "--topics", null);
        String out = arg(args, "--out", null), state = arg(args, "--state", null);
        int threads = Integer.parseInt(arg(args, "--threads", "1"));
        int p = Integer.parseInt(arg(args, "--partitions", "4"));
        long lastEnd = Long.parseLong(arg(args, "--last-window-end", null));
        long commitMs = Long.parseLong(arg(args, "--commit-ms", "1000"));

        Topology t = new Topology();
        t.addSource("events", IN);
        t.addProcessor("reader", () -> new Reader(topicsPath), "events");
        t.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("event-ids"),
                            Serdes.String(), Serdes.Long()), "reader");
        t.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("seen"),
                            Serdes.String(), Serdes.Long()), "reader");
        t.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("interest"),
                            Serdes.String(), Serdes.ByteArray()), "reader");
        t.addSink("to-reads", READS, "reader");
        t.addSink("to-interest", INTEREST, "reader");
        t.addSource("reads", READS);
        t.addProcessor("trending", () -> new Trending(lastEnd, p), "reads");
        t.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("panes"),
                            Serdes.String(), Serdes.ByteArray()), "trending");
        t.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("trend-meta"),
                            Serdes.String(), Serdes.Long()), "trending");
        t.addSink("to-trending", TRENDING, "trending");

        Properties sp = new Properties();
        sp.put(StreamsConfig.APPLICATION_ID_CONFIG, "newsflow-readpath-peer-" + arg(args, "--id", "0"));
        sp.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        sp.put(StreamsConfig.STATE_DIR_CONFIG, state);
        sp.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);
        sp.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        sp.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, commitMs);
        sp.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        sp.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        sp.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        long t0 = System.nanoTime();
        KafkaStreams ks = new KafkaStreams(t, sp);
        ks.start();
        long deadline = System.nanoTime() + 1800_000_000_000L;
        while (DONE_NS.get() == 0 && System.nanoTime() < deadline
               && ks.state() != KafkaStreams.State.ERROR)
            Thread.sleep(20);
        long c1 = cpuNs();
        ks.close(Duration.ofSeconds(60));
        if (DONE_NS.get() == 0) {
            System.err.println("ReadPathStreams: the application did not finish (state " + ks.state()
                + ", " + EVENTS.get() + " events read)");
            System.exit(1);
        }
        dump(bootstrap, INTEREST, out + "/kstreams-interest-0.jsonl");
        dump(bootstrap, TRENDING, out + "/kstreams-trending-0.jsonl");
        long n = EVENTS.get();
        double secs = (DONE_NS.get() - FIRST_NS.get()) / 1e9;
        System.out.printf("{\"bench\":\"stream.kstreams\",\"kafka_streams\":\"%s\",\"threads\":%d,"
                + "\"partitions\":%d,\"events\":%d,\"seconds\":%.3f,\"events_per_s\":%.0f,"
                + "\"cpu_ns_per_event\":%.0f,\"startup_s\":%.3f,\"updates\":%d,"
                + "\"event_id_duplicates\":%d,\"interest_duplicates\":%d,\"late\":%d,"
                + "\"windows\":%d,\"commit_ms\":%d,"
                + "\"guarantee\":\"exactly_once_v2\",\"state\":\"rocksdb\"}%n",
            org.apache.kafka.common.utils.internals.AppInfoParser.getVersion(),
            threads, p, n, secs, n / secs, (c1 - FIRST_CPU_NS.get()) / (double) n,
            (FIRST_NS.get() - t0) / 1e9, UPDATES.get(), ID_DUPS.get(), SEEN_DUPS.get(),
            LATE.get(), WINDOWS.get(), commitMs);
    }

    public static void main(String[] args) throws Exception {
        names(args);
        if (args.length > 0 && args[0].equals("load"))
            load(args);
        else if (args.length > 0 && args[0].equals("run"))
            run(args);
        else {
            System.err.println("usage: ReadPathStreams load|run ... (see the file's comment)");
            System.exit(2);
        }
    }
}
