/* ReadPath.java — newsflow's read path as an Apache Flink job, the stream peer of
 * perf/run_stream.sh (issue 22). Same input as bench_readpath --dump (a read-events JSON Lines
 * file in event-time order, and every article's topic vector), same semantics, outputs written
 * so that perf/stream/compare_stream.py can check them equal to newsflow's:
 *
 *   read events -> keyBy(user_id): event-id dedup (TTL 2 h), then
 *     - interest: (user, article, session) seen-set (TTL 24 h); per user an EMA of the article
 *       topic vectors: days = max(0, ts - updated) / 86400000; v = 0.95^days * v + 0.1 * topics;
 *       v /= ||v||_2; version += 1; updated = max(updated, ts)  -> interest-updates lines
 *     - trending: event time, watermarks 5 s behind the largest ts; a 1 h window sliding by 30 s,
 *       counted as newsflow does: per 30 s pane (tumbling window per article), then per window
 *       end the sum of its 120 panes per article, then the top 50 by count desc, article_id asc
 *       -> trending lines
 *
 * The windows are counted per pane rather than with SlidingEventTimeWindows (which keeps every
 * event in 120 window states): that is how a Flink user who cares about speed writes a long
 * window with a short slide, and it gives Flink the same shape of work as newsflow's panes.
 *
 * Runs in a local MiniCluster. --backend rocksdb (default: EmbeddedRocksDBStateBackend) or
 * hashmap (HashMapStateBackend: state as objects on the heap); --checkpoint-ms N: a checkpoint
 * every N ms (default 10000; 0: no checkpoints). perf/run_stream.sh runs rocksdb with 10 s
 * checkpoints (the "durable" pair, against newsflow with its store and epochs) and hashmap
 * without checkpoints (the "memory" pair, against newsflow in memory). Prints one JSON line on
 * stdout: {"bench":"stream.flink","parallelism":P,"events":N,"seconds":S,"events_per_s":R,
 * "cpu_ns_per_event":C,...}; the clock runs from the first record parsed to the end of the job
 * (MiniCluster start-up is outside it, the final drain inside).
 *
 * With checkpoints, the end of the job includes the final checkpoint: since Flink 1.15
 * (execution.checkpointing.checkpoints-after-tasks-finish, on by default) a task that has
 * finished its input waits for a checkpoint taken after that to complete before it exits, so that
 * what it wrote is covered by one (here, Flink 2.3 triggered it within ~10 ms of the last end of
 * input rather than at the next 10 s tick). "final_checkpoint_wait_s": the time from the last
 * sink's end of input to the first snapshot after it, seen by a pass-through function before
 * each sink (-1: a checkpoint was in flight then, or none was seen); "durable_seconds" is the
 * clock less that wait, if any — the job's time to process every event and have a checkpoint
 * cover it, what newsflow's durable_seconds (bench_readpath --epoch-ms) measures too. */
package newsflow.peer;

import static newsflow.peer.ReadPathModel.*;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

public final class ReadPath {
    static final long EVENT_ID_TTL_MS = 2 * 3600000L, SEEN_TTL_MS = 24 * 3600000L;

    /* The MiniCluster runs in this JVM: the clock and the counters are plain statics. */
    static final AtomicLong FIRST_NS = new AtomicLong(), FIRST_CPU_NS = new AtomicLong();
    static final AtomicLong EVENTS = new AtomicLong(), ID_DUPS = new AtomicLong(),
        SEEN_DUPS = new AtomicLong(), UNKNOWN = new AtomicLong(), UPDATES = new AtomicLong(),
        WINDOWS = new AtomicLong();
    /* The final checkpoint: the last end of input at a sink, and per checkpoint id the first
     * snapshot and the first completion seen by a Mark (nanoTime). */
    static final AtomicLong END_NS = new AtomicLong();
    static final java.util.concurrent.ConcurrentHashMap<Long, Long> SNAP_NS =
        new java.util.concurrent.ConcurrentHashMap<>(), DONE_NS =
        new java.util.concurrent.ConcurrentHashMap<>();

    /** One read event. */
    public static final class Event {
        public String userId, articleId, sessionId, eventId;
        public long ts;

        public Event() {}
    }

    /** A counted read (after the event-id dedup): what the trending side counts. */
    public static final class Read {
        public String articleId;
        public long ts;

        public Read() {}
    }

    /** One article's count in one 30 s pane. */
    public static final class Pane {
        public String articleId;
        public long end, count;

        public Pane() {}
    }

    /** One article's count in the window ending at `end`. */
    public static final class Scored {
        public String articleId;
        public long end, count;

        public Scored() {}
    }

    /** A reader's interest state, one value (one RocksDB get and put per update). */
    public static final class Interest {
        public long version, updated;
        public double[] v = new double[TOPICS];

        public Interest() {}
    }

    static final class Parse implements MapFunction<String, Event> {
        private transient ObjectMapper json;

        @Override
        public Event map(String line) throws Exception {
            if (FIRST_NS.get() == 0 && FIRST_NS.compareAndSet(0, System.nanoTime()))
                FIRST_CPU_NS.set(cpuNs());
            if (json == null)
                json = new ObjectMapper();
            JsonNode n = json.readTree(line);
            Event e = new Event();
            e.eventId = n.path("event_id").asText("");
            e.userId = n.get("user_id").asText();
            e.articleId = n.get("article_id").asText();
            e.sessionId = n.path("session_id").asText("");
            e.ts = n.get("ts").asLong();
            EVENTS.incrementAndGet();
            return e;
        }
    }

    static final OutputTag<String> UPDATES_TAG = new OutputTag<>("interest-updates", Types.STRING);

    /* Keyed by user_id: event-id dedup, then the interest update (to the side output), and the
     * counted read to the trending side (main output). */
    static final class Reader extends KeyedProcessFunction<String, Event, Read> {
        private final String topicsPath;
        private transient MapState<String, Boolean> ids, seen;
        private transient ValueState<Interest> interest;
        private transient Map<String, double[]> table;

        Reader(String topicsPath) {
            this.topicsPath = topicsPath;
        }

        @Override
        public void open(OpenContext ctx) throws Exception {
            MapStateDescriptor<String, Boolean> idd =
                new MapStateDescriptor<>("event-ids", Types.STRING, Types.BOOLEAN);
            idd.enableTimeToLive(StateTtlConfig.newBuilder(Duration.ofMillis(EVENT_ID_TTL_MS)).build());
            MapStateDescriptor<String, Boolean> sd =
                new MapStateDescriptor<>("seen", Types.STRING, Types.BOOLEAN);
            sd.enableTimeToLive(StateTtlConfig.newBuilder(Duration.ofMillis(SEEN_TTL_MS)).build());
            ids = getRuntimeContext().getMapState(idd);
            seen = getRuntimeContext().getMapState(sd);
            interest = getRuntimeContext().getState(
                new ValueStateDescriptor<>("interest", Types.POJO(Interest.class)));
            table = loadTopics(topicsPath);
        }

        @Override
        public void processElement(Event e, Context ctx, Collector<Read> out) throws Exception {
            if (!e.eventId.isEmpty()) {
                if (ids.contains(e.eventId)) {
                    ID_DUPS.incrementAndGet();
                    return;
                }
                ids.put(e.eventId, Boolean.TRUE);
            }
            Read r = new Read();
            r.articleId = e.articleId;
            r.ts = e.ts;
            out.collect(r);
            double[] w = table.get(e.articleId);
            if (w == null) {
                UNKNOWN.incrementAndGet();
                return;
            }
            String sk = e.articleId + '\u0000' + e.sessionId;
            if (seen.contains(sk)) {
                SEEN_DUPS.incrementAndGet();
                return;
            }
            seen.put(sk, Boolean.TRUE);
            Interest s = interest.value();
            if (s == null)
                s = new Interest();
            s.updated = emaUpdate(s.v, s.version, s.updated, e.ts, w);
            s.version++;
            interest.update(s);
            ctx.output(UPDATES_TAG, interestLine(ctx.getCurrentKey(), s.version, s.v, s.updated));
            UPDATES.incrementAndGet();
        }
    }

    static final class Count implements AggregateFunction<Read, long[], Long> {
        @Override
        public long[] createAccumulator() {
            return new long[1];
        }

        @Override
        public long[] add(Read r, long[] acc) {
            acc[0]++;
            return acc;
        }

        @Override
        public Long getResult(long[] acc) {
            return acc[0];
        }

        @Override
        public long[] merge(long[] a, long[] b) {
            a[0] += b[0];
            return a;
        }
    }

    static final class PaneOut extends ProcessWindowFunction<Long, Pane, String, TimeWindow> {
        @Override
        public void process(String article, Context ctx, Iterable<Long> counts, Collector<Pane> out) {
            Pane p = new Pane();
            p.articleId = article;
            p.end = ctx.window().getEnd();
            p.count = counts.iterator().next();
            out.collect(p);
        }
    }

    /** An article's panes that can still be in a window to come (a watermark can jump past
     * several window ends at once, so there can be more than a window's 120). */
    public static final class Panes {
        public long[] ends = new long[8];
        public long[] counts = new long[8];
        public int n;

        public Panes() {}
    }

    /* Keyed by article: its panes (one value); at each window end (an event-time timer, one at a
     * time, the next one set while a pane is left for it) the sum of the window's panes. Windows
     * past lastEnd are not made: a bounded input ends with a final watermark that a running job
     * never sees, and newsflow emits only the windows its watermark passed. */
    static final class Slide extends KeyedProcessFunction<String, Pane, Scored> {
        private final long lastEnd;
        private transient ValueState<Panes> panes;

        Slide(long lastEnd) {
            this.lastEnd = lastEnd;
        }

        @Override
        public void open(OpenContext ctx) {
            panes = getRuntimeContext().getState(
                new ValueStateDescriptor<>("panes", Types.POJO(Panes.class)));
        }

        @Override
        public void processElement(Pane p, Context ctx, Collector<Scored> out) throws Exception {
            Panes ps = panes.value();
            if (ps == null)
                ps = new Panes();
            if (ps.n == ps.ends.length) {
                ps.ends = java.util.Arrays.copyOf(ps.ends, 2 * ps.n);
                ps.counts = java.util.Arrays.copyOf(ps.counts, 2 * ps.n);
            }
            ps.ends[ps.n] = p.end;
            ps.counts[ps.n++] = p.count;
            panes.update(ps);
            if (p.end <= lastEnd)
                ctx.timerService().registerEventTimeTimer(p.end);
        }

        @Override
        public void onTimer(long end, OnTimerContext ctx, Collector<Scored> out) throws Exception {
            Panes ps = panes.value();
            long sum = 0;
            int kept = 0;
            for (int i = 0; i < ps.n; i++) {
                if (ps.ends[i] > end - WINDOW_MS && ps.ends[i] <= end)
                    sum += ps.counts[i];
                if (ps.ends[i] > end + SLIDE_MS - WINDOW_MS) { /* also in a later window */
                    ps.ends[kept] = ps.ends[i];
                    ps.counts[kept++] = ps.counts[i];
                }
            }
            ps.n = kept;
            if (sum > 0) {
                Scored s = new Scored();
                s.articleId = ctx.getCurrentKey();
                s.end = end;
                s.count = sum;
                out.collect(s);
            }
            if (kept == 0) {
                panes.clear();
                return;
            }
            panes.update(ps);
            if (end + SLIDE_MS <= lastEnd)
                ctx.timerService().registerEventTimeTimer(end + SLIDE_MS);
        }
    }

    /* Keyed by window end: the top 50 (count desc, article_id asc), when the watermark passes. */
    static final class TopK extends KeyedProcessFunction<Long, Scored, String> {
        private transient ListState<Scored> items;

        @Override
        public void open(OpenContext ctx) {
            items = getRuntimeContext().getListState(
                new ListStateDescriptor<>("items", Types.POJO(Scored.class)));
        }

        @Override
        public void processElement(Scored s, Context ctx, Collector<String> out) throws Exception {
            items.add(s);
            ctx.timerService().registerEventTimeTimer(s.end);
        }

        @Override
        public void onTimer(long end, OnTimerContext ctx, Collector<String> out) throws Exception {
            List<Map.Entry<String, Long>> all = new ArrayList<>();
            for (Scored s : items.get())
                all.add(Map.entry(s.articleId, s.count));
            items.clear();
            out.collect(trendingLine(end, all));
            WINDOWS.incrementAndGet();
        }
    }

    /* A pass-through before each sink (chained with it, in every mode): when checkpoints snapshot
     * and complete. */
    static final class Mark implements MapFunction<String, String>, CheckpointedFunction,
                                       CheckpointListener {
        @Override
        public String map(String line) {
            return line;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) {
            SNAP_NS.putIfAbsent(ctx.getCheckpointId(), System.nanoTime());
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) {}

        @Override
        public void notifyCheckpointComplete(long id) {
            DONE_NS.putIfAbsent(id, System.nanoTime());
        }
    }

    /* The idle wait for the final checkpoint (class comment), s; -1 if not seen or not idle. */
    static double finalCheckpointWait() {
        long end = END_NS.get(), first = Long.MAX_VALUE;
        for (Map.Entry<Long, Long> e : SNAP_NS.entrySet()) {
            Long done = DONE_NS.get(e.getKey());
            if (e.getValue() <= end && (done == null || done > end))
                return -1; /* a checkpoint in flight at the end: its work is not idle */
            if (e.getValue() > end)
                first = Math.min(first, e.getValue());
        }
        return end == 0 || first == Long.MAX_VALUE ? -1 : (first - end) / 1e9;
    }

    /* Lines to <dir>/<name>-<subtask>.jsonl. */
    static final class Lines implements Sink<String> {
        private final String dir, name;

        Lines(String dir, String name) {
            this.dir = dir;
            this.name = name;
        }

        @Override
        public SinkWriter<String> createWriter(WriterInitContext ctx) throws IOException {
            BufferedWriter w = new BufferedWriter(new FileWriter(dir + "/" + name + "-"
                + ctx.getTaskInfo().getIndexOfThisSubtask() + ".jsonl"), 1 << 20);
            return new SinkWriter<String>() {
                @Override
                public void write(String line, Context c) throws IOException {
                    w.write(line);
                    w.write('\n');
                }

                @Override
                public void flush(boolean endOfInput) throws IOException {
                    w.flush();
                    if (endOfInput)
                        END_NS.accumulateAndGet(System.nanoTime(), Math::max);
                }

                @Override
                public void close() throws IOException {
                    w.close();
                }
            };
        }
    }

    static String arg(String[] args, String name, String dflt) {
        for (int i = 0; i + 1 < args.length; i++)
            if (args[i].equals(name))
                return args[i + 1];
        if (dflt == null) {
            System.err.println("usage: ReadPath --events FILE --topics FILE --out DIR --state DIR "
                + "--last-window-end MS [--parallelism P] [--backend rocksdb|hashmap] "
                + "[--checkpoint-ms MS (0: none)] [--interest-only]");
            System.exit(2);
        }
        return dflt;
    }

    public static void main(String[] args) throws Exception {
        String events = arg(args, "--events", null), topicsPath = arg(args, "--topics", null);
        String out = arg(args, "--out", null), state = arg(args, "--state", null);
        long lastEnd = Long.parseLong(arg(args, "--last-window-end", null));
        int p = Integer.parseInt(arg(args, "--parallelism", "1"));
        long cpMs = Long.parseLong(arg(args, "--checkpoint-ms", "10000"));
        String backend = arg(args, "--backend", "rocksdb");
        if (!backend.equals("rocksdb") && !backend.equals("hashmap")) {
            System.err.println("ReadPath: --backend is rocksdb or hashmap");
            System.exit(2);
        }

        Configuration conf = new Configuration();
        conf.set(StateBackendOptions.STATE_BACKEND, backend);
        conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, "file://" + state + "/checkpoints");
        if (cpMs > 0)
            conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(cpMs));
        conf.set(TaskManagerOptions.NUM_TASK_SLOTS, p);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(p, conf);

        /* One reader of the one file (it is in event-time order, so the watermarks are exact and
         * each user's events stay in order through the keyBy). */
        FileSource<String> src =
            FileSource.forRecordStreamFormat(new TextLineInputFormat(), new Path(events)).build();
        DataStream<Event> ev = env.fromSource(src, WatermarkStrategy.noWatermarks(), "read-events")
                                   .setParallelism(1)
                                   .map(new Parse())
                                   .setParallelism(1)
                                   .assignTimestampsAndWatermarks(
                                       WatermarkStrategy
                                           .<Event>forBoundedOutOfOrderness(
                                               Duration.ofMillis(LATENESS_MS))
                                           .withTimestampAssigner((e, t) -> e.ts))
                                   .setParallelism(1);
        SingleOutputStreamOperator<Read> reads =
            ev.keyBy(e -> e.userId).process(new Reader(topicsPath)).name("dedup+interest");
        reads.getSideOutput(UPDATES_TAG)
            .map(new Mark())
            .name("mark")
            .sinkTo(new Lines(out, "flink-interest"))
            .name("interest-updates");
        if (args.length > 0 && java.util.Arrays.asList(args).contains("--interest-only")) {
            /* where the time goes: the dedup and interest side alone (no output check then) */
            reads.sinkTo(new org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink<>());
        } else
        reads.keyBy(r -> r.articleId)
            .window(TumblingEventTimeWindows.of(Duration.ofMillis(SLIDE_MS)))
            .aggregate(new Count(), new PaneOut())
            .name("panes")
            .keyBy(pn -> pn.articleId)
            .process(new Slide(lastEnd))
            .name("slide")
            .keyBy(s -> s.end)
            .process(new TopK())
            .name("top-k")
            .map(new Mark())
            .name("mark")
            .sinkTo(new Lines(out, "flink-trending"))
            .name("trending");

        long t0 = System.nanoTime();
        env.execute("newsflow read path (Flink peer)");
        long t1 = System.nanoTime(), c1 = cpuNs();
        long n = EVENTS.get();
        double secs = (t1 - FIRST_NS.get()) / 1e9;
        double wait = cpMs > 0 ? finalCheckpointWait() : -1;
        double durable = secs - Math.max(wait, 0);
        System.out.printf("{\"bench\":\"stream.flink\",\"flink\":\"%s\",\"parallelism\":%d,"
                + "\"events\":%d,\"seconds\":%.3f,\"events_per_s\":%.0f,"
                + "\"events_per_s_per_core\":%.0f,\"cpu_ns_per_event\":%.0f,\"startup_s\":%.3f,"
                + "\"updates\":%d,\"event_id_duplicates\":%d,\"interest_duplicates\":%d,"
                + "\"unknown\":%d,\"windows\":%d,\"checkpoint_ms\":%d,\"state\":\"%s\","
                + "\"checkpoints\":%d,\"final_checkpoint_wait_s\":%.3f,\"durable_seconds\":%.3f,"
                + "\"durable_events_per_s\":%.0f}%n",
            org.apache.flink.runtime.util.EnvironmentInformation.getVersion(), p, n, secs,
            n / secs, n / secs / p, (c1 - FIRST_CPU_NS.get()) / (double) n,
            (FIRST_NS.get() - t0) / 1e9, UPDATES.get(), ID_DUPS.get(), SEEN_DUPS.get(),
            UNKNOWN.get(), WINDOWS.get(), cpMs, backend, DONE_NS.size(), wait, durable,
            n / durable);
    }
}
