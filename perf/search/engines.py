#!/usr/bin/env python3
"""Embedded full-text engines side by side: SQLite FTS5 and Xapian, on one news-like corpus.

Usage (corpus and queries from perf/search/gen_corpus.py):
    perf/search/engines.py --corpus /tmp/searchbench/corpus-200k.jsonl \
        --queries /tmp/searchbench/queries-200k.jsonl --dir /tmp/searchbench/work-200k \
        [--threads 1,2] [--seconds 10] [--engines fts5,xapian] [--batch 1000] [--limit N] \
        [--xapian-no-fsync] [--reuse]

Xapian comes from Debian's python3-xapian, importable only by /usr/bin/python3; when run by
another interpreter without it (e.g. pyenv's python3) the script re-executes itself with
/usr/bin/python3 and reports both interpreters' libsqlite versions ("orig_*" keys).

Per engine, each phase in its own process:
  1. index: read the corpus into memory, then index it (commit every --batch articles) and
     close; articles/s, growth of the process's max RSS over indexing, disk size; then
     FTS5 'optimize' (size reported) and VACUUM (optimize leaves the old pages on the
     freelist) / Xapian compact, and the size after that (queries run on that state).
       fts5:   fts5(title, summary, tokenize='unicode61 remove_diacritics 2'), WAL,
               synchronous=NORMAL, rowid = published_ms*4096 + i%4096, rank = bm25(4.0, 1.0).
       xapian: TermGenerator without stemming, title with wdf 4, then summary after a
               position gap; value 0 = published_ms; data = title "\\n" summary; committed with
               Xapian's default fsync (DB_NO_SYNC with --xapian-no-fsync: closer to FTS5's
               WAL + synchronous=NORMAL, which syncs only at checkpoints); compacted to a
               second directory.
  2. check (untimed): exact number of matches of every query; top-20 ids of the first 50;
     one pass of top-20 without snippets (p50/p99_ms_nosnippet).
  3. timed: for each W in --threads, W worker processes, each with its own connection /
     database, run the query list round-robin (from different offsets) for --seconds.
     One query = parse our syntax, translate, top 20 by BM25 and a snippet of each summary:
       fts5:   SELECT rowid, bm25(fts, 4.0, 1.0), snippet(fts, 1, '[', ']', '…', 12)
               FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT 20
       xapian: Query(OP_AND / OP_PHRASE / OP_AND_NOT) from TermGenerator terms, BM25Weight
               with FTS5's parameters (k1 1.2, b 0.75), get_mset(0, 20), mset.snippet(...).
     Latencies are per query as seen from Python; by_kind_<W> splits the first run by kind.
Stdout: one JSON object per engine, then one {"engine": "compare"} line with the Jaccard
overlap of the two engines' top-20 sets for the first 50 queries and how often their match
counts agree. Stderr: progress and a human summary. Nothing is asserted.
"""

import argparse
import array
import json
import math
import multiprocessing
import os
import queue
import re
import resource
import shutil
import sqlite3
import sys
import time
import traceback

SYSTEM_PYTHON = "/usr/bin/python3"
ENGINES = ("fts5", "xapian")
TOPN = 20
COMPARE_QUERIES = 50

# ---------------------------------------------------------------------------------------
# Our query syntax: words, "quoted phrases", -word and -"phrase" exclusions.

TOKEN_RE = re.compile(r'(-?)"([^"]*)"?|(-?)([^\s"]+)')
HAS_WORD_RE = re.compile(r"[^\W_]")


def parse_query(q):
    """Return (positives, negatives): lists of words or phrases (a phrase is one string)."""
    pos, neg = [], []
    for m in TOKEN_RE.finditer(q):
        if m.group(2) is not None:
            minus, text = m.group(1), m.group(2)
        else:
            minus, text = m.group(3), m.group(4)
        if HAS_WORD_RE.search(text):  # nothing a tokenizer would keep: drop it
            (neg if minus else pos).append(text)
    return pos, neg


def fts5_quote(text):
    """An FTS5 string: the tokenizer makes it one term or a phrase; no operator survives."""
    return '"' + text.replace('"', '""') + '"'


def fts5_match(q):
    """Translate our syntax to an FTS5 MATCH expression, or None if nothing can match."""
    pos, neg = parse_query(q)
    if not pos:
        return None
    expr = " AND ".join(map(fts5_quote, pos))
    if neg:
        expr = "(%s) NOT (%s)" % (expr, " OR ".join(map(fts5_quote, neg)))
    return expr


# ---------------------------------------------------------------------------------------
# Engines. build() and optimize() run in the index process; open(), search() and count()
# in the check and query processes.

class Fts5:
    name = "fts5"
    SEARCH_SQL = ("SELECT rowid, bm25(fts, 4.0, 1.0), snippet(fts, 1, '[', ']', '…', 12) "
                  "FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT %d" % TOPN)
    BARE_SQL = ("SELECT rowid, bm25(fts, 4.0, 1.0) "
                "FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT %d" % TOPN)
    COUNT_SQL = "SELECT count(*) FROM fts WHERE fts MATCH ?"

    def __init__(self, workdir, batch):
        self.path = os.path.join(workdir, "fts5.db")
        self.batch = batch
        self.conn = None

    @staticmethod
    def version():
        return sqlite3.sqlite_version

    def disk_bytes(self):
        paths = (self.path, self.path + "-wal", self.path + "-shm")
        return sum(os.path.getsize(p) for p in paths if os.path.exists(p))

    def build(self, articles, progress):
        for p in (self.path, self.path + "-wal", self.path + "-shm"):
            if os.path.exists(p):
                os.remove(p)
        conn = sqlite3.connect(self.path, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("CREATE VIRTUAL TABLE fts USING fts5(title, summary, "
                     "tokenize='unicode61 remove_diacritics 2')")
        # ORDER BY rank then sorts by the weighted score (title 4x), inside FTS5.
        conn.execute("INSERT INTO fts(fts, rank) VALUES('rank', 'bm25(4.0, 1.0)')")
        sql = "INSERT INTO fts(rowid, title, summary) VALUES (?, ?, ?)"
        for start in range(0, len(articles), self.batch):
            conn.execute("BEGIN")
            conn.executemany(sql, (a[:3] for a in articles[start:start + self.batch]))
            conn.execute("COMMIT")
            progress(start + self.batch)
        conn.close()  # last connection: checkpoints the WAL and removes it
        return {"journal_mode": "wal", "synchronous": "normal"}

    def optimize(self):
        """'optimize' merges all segments into one but leaves the old pages on the freelist:
        report that size, then VACUUM so that disk_bytes compares with a compacted Xapian."""
        conn = sqlite3.connect(self.path, isolation_level=None)
        conn.execute("INSERT INTO fts(fts) VALUES('optimize')")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0] * page
        conn.close()
        r = {"disk_bytes_after_optimize": self.disk_bytes(), "freelist_bytes_after_optimize": free}
        t0 = time.perf_counter()
        conn = sqlite3.connect(self.path, isolation_level=None)
        conn.execute("VACUUM")
        r["vacuum_s"] = round(time.perf_counter() - t0, 3)
        r["table_bytes"] = {name: size for name, size in
                            conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")}
        conn.close()
        return r

    def open(self):
        self.conn = sqlite3.connect(self.path)

    def search(self, q, snippets=True):
        match = fts5_match(q)
        if match is None:
            return []
        sql = self.SEARCH_SQL if snippets else self.BARE_SQL
        return [r[0] for r in self.conn.execute(sql, (match,))]

    def count(self, q):
        match = fts5_match(q)
        return 0 if match is None else self.conn.execute(self.COUNT_SQL, (match,)).fetchone()[0]


class Xapian:
    name = "xapian"

    def __init__(self, workdir, batch):
        self.live_path = os.path.join(workdir, "xapian-live")
        self.path = os.path.join(workdir, "xapian")  # compacted copy, the one queried
        self.batch = batch
        self.fsync = True
        self.xapian = None

    def _import(self):
        import xapian
        self.xapian = xapian
        return xapian

    def _termgen(self):
        tg = self.xapian.TermGenerator()
        tg.set_stemming_strategy(self.xapian.TermGenerator.STEM_NONE)
        return tg

    @staticmethod
    def version():
        import xapian
        return xapian.version_string()

    def disk_bytes(self, path=None):
        total = 0
        for root, _, files in os.walk(path or self.path):
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
        return total

    def build(self, articles, progress):
        xapian = self._import()
        shutil.rmtree(self.live_path, ignore_errors=True)
        flags = xapian.DB_CREATE_OR_OVERWRITE | (0 if self.fsync else xapian.DB_NO_SYNC)
        db = xapian.WritableDatabase(self.live_path, flags)
        tg = self._termgen()
        for n, (_, title, summary, published_ms) in enumerate(articles, 1):
            doc = xapian.Document()
            tg.set_document(doc)
            tg.index_text(title, 4)
            tg.increase_termpos()  # no phrase across title and summary
            tg.index_text(summary)
            doc.add_value(0, xapian.sortable_serialise(published_ms))
            doc.set_data(title + "\n" + summary)
            db.add_document(doc)  # docid = n: corpus (= time) order
            if n % self.batch == 0:
                db.commit()
                progress(n)
        db.commit()
        db.close()
        return {"fsync": self.fsync}

    def disk_bytes_live(self):
        return self.disk_bytes(self.live_path)

    def optimize(self):
        xapian = self._import()
        shutil.rmtree(self.path, ignore_errors=True)
        db = xapian.Database(self.live_path)
        db.compact(self.path, xapian.DBCOMPACT_NO_RENUMBER)
        db.close()
        return {}

    def open(self):
        xapian = self._import()
        self.db = xapian.Database(self.path)
        self.enquire = xapian.Enquire(self.db)
        self.enquire.set_weighting_scheme(xapian.BM25Weight(1.2, 0, 1, 0.75, 0.5))
        self.tg = self._termgen()
        self.stem = xapian.Stem("none")
        self.flags = (xapian.MSet.SNIPPET_BACKGROUND_MODEL | xapian.MSet.SNIPPET_EXHAUSTIVE)

    def terms(self, text):
        """The terms indexing would make of text, in order (same TermGenerator settings)."""
        doc = self.xapian.Document()
        self.tg.set_document(doc)
        self.tg.index_text(text)
        return [t for _, t in sorted((p, item.term) for item in doc.termlist()
                                     for p in item.positer)]

    def _sub(self, text):
        Q = self.xapian.Query
        ts = self.terms(text)
        if not ts:
            return None
        return Q(ts[0]) if len(ts) == 1 else Q(Q.OP_PHRASE, ts)

    def query(self, q):
        Q = self.xapian.Query
        pos, neg = parse_query(q)
        pq = [s for s in map(self._sub, pos) if s is not None]
        if not pq:
            return None
        query = pq[0] if len(pq) == 1 else Q(Q.OP_AND, pq)
        nq = [s for s in map(self._sub, neg) if s is not None]
        if nq:
            query = Q(Q.OP_AND_NOT, query, nq[0] if len(nq) == 1 else Q(Q.OP_OR, nq))
        return query

    def search(self, q, snippets=True):
        query = self.query(q)
        if query is None:
            return []
        self.enquire.set_query(query)
        mset = self.enquire.get_mset(0, TOPN)
        if not snippets:
            return [m.docid for m in mset]
        ids = []
        for m in mset:
            summary = m.document.get_data().decode("utf-8").split("\n", 1)[1]
            mset.snippet(summary, 80, self.stem, self.flags, "[", "]", "…")
            ids.append(m.docid)
        return ids

    def count(self, q):
        query = self.query(q)
        if query is None:
            return 0
        self.enquire.set_query(query)
        mset = self.enquire.get_mset(0, 0, self.db.get_doccount())  # exact count
        return mset.get_matches_estimated()


def make_engine(name, workdir, batch):
    return {"fts5": Fts5, "xapian": Xapian}[name](workdir, batch)


# ---------------------------------------------------------------------------------------
# Processes.

def maxrss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def current_rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _child_main(out_q, fn, args):
    try:
        out_q.put(("ok", fn(*args)))
    except BaseException:
        out_q.put(("error", traceback.format_exc()))


def run_children(fn, args_list):
    """Run fn(*args) in one forked process per args; return their results in order."""
    ctx = multiprocessing.get_context("fork")
    out_qs, procs = [], []
    for args in args_list:
        q = ctx.Queue()
        p = ctx.Process(target=_child_main, args=(q, fn, args))
        p.start()
        out_qs.append(q)
        procs.append(p)
    results = []
    for q, p in zip(out_qs, procs):
        while True:
            try:
                status, value = q.get(timeout=1.0)
                break
            except queue.Empty:
                if not p.is_alive() and q.empty():
                    raise RuntimeError("child %d died with exit code %s" % (p.pid, p.exitcode))
        if status != "ok":
            raise RuntimeError("child failed:\n" + value)
        results.append(value)
    for p in procs:
        p.join()
    return results


def load_corpus(path, limit):
    """[(rowid, title, summary, published_ms)] in file order."""
    out = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if limit and i >= limit:
                break
            a = json.loads(line)
            out.append((a["published_ms"] * 4096 + i % 4096, a["title"], a["summary"],
                        a["published_ms"]))
    return out


def index_phase(name, args):
    articles = load_corpus(args.corpus, args.limit)
    text_bytes = sum(len(a[1].encode()) + len(a[2].encode()) for a in articles)
    eng = make_engine(name, args.dir, args.batch)
    eng.fsync = not args.xapian_no_fsync
    n = len(articles)
    t_load = time.perf_counter()

    def progress(done):
        if done % 100_000 < args.batch and done < n:
            dt = time.perf_counter() - t_load
            log("  %s: %d/%d indexed, %.0f articles/s" % (name, done, n, done / dt))

    rss0, maxrss0 = current_rss_bytes(), maxrss_bytes()
    t0 = time.perf_counter()
    extra = eng.build(articles, progress)
    index_s = time.perf_counter() - t0
    maxrss1, rss1 = maxrss_bytes(), current_rss_bytes()
    before = eng.disk_bytes_live() if name == "xapian" else eng.disk_bytes()
    t1 = time.perf_counter()
    extra.update(eng.optimize())
    optimize_s = time.perf_counter() - t1
    after = eng.disk_bytes()
    r = {"articles": n, "text_bytes": text_bytes, "batch": args.batch,
         "index_s": round(index_s, 3), "articles_per_s": round(n / index_s, 1),
         "rss_before_bytes": rss0, "rss_growth_bytes": max(0, maxrss1 - maxrss0),
         "rss_after_bytes": rss1,
         "disk_bytes_before_optimize": before,
         "bytes_per_article_before_optimize": round(before / n, 1),
         "optimize_s": round(optimize_s, 3),
         "disk_bytes": after, "bytes_per_article": round(after / n, 1)}
    r.update(extra)
    return r


def check_phase(name, args, queries):
    eng = make_engine(name, args.dir, args.batch)
    eng.open()
    t0 = time.perf_counter()
    counts = [eng.count(q) for q, _ in queries]
    count_s = time.perf_counter() - t0
    tops = [eng.search(q) for q, _ in queries[:COMPARE_QUERIES]]
    # One pass over all queries without snippets (Xapian: no document fetch either).
    bare = []
    for q, _ in queries:
        t = time.perf_counter()
        eng.search(q, snippets=False)
        bare.append(time.perf_counter() - t)
    return {"counts": counts, "tops": tops, "count_s": count_s, "bare": bare}


def query_worker(name, args, queries, first, step, barrier):
    eng = make_engine(name, args.dir, args.batch)
    eng.open()
    n = len(queries)
    kind_ids = {k: i for i, k in enumerate(sorted({k for _, k in queries}))}
    qs = [q for q, _ in queries]
    ks = [kind_ids[k] for _, k in queries]
    for j in range(min(n, 100)):  # warm this process (caches, lazily opened tables)
        eng.search(qs[n - 1 - j])
    barrier.wait(timeout=600)
    lat = array.array("d")
    kinds = array.array("B")
    i = first % n
    perf_counter = time.perf_counter
    start = perf_counter()
    deadline = start + args.seconds
    while True:
        t = perf_counter()
        if t >= deadline:
            break
        eng.search(qs[i])
        lat.append(perf_counter() - t)
        kinds.append(ks[i])
        i += step
        if i >= n:
            i -= n
    elapsed = perf_counter() - start
    return {"lat": lat.tobytes(), "kinds": kinds.tobytes(), "elapsed": elapsed,
            "kind_names": sorted(kind_ids, key=kind_ids.get)}


def timed_phase(name, args, queries, workers):
    """Worker w runs queries w, w+W, w+2W, ...: together the workers run (about) a prefix of
    the list, as one worker does, so that runs with different W see the same mix."""
    barrier = multiprocessing.get_context("fork").Barrier(workers)
    res = run_children(query_worker, [(name, args, queries, w, workers, barrier)
                                      for w in range(workers)])
    lat, kinds = array.array("d"), array.array("B")
    qps = 0.0
    for r in res:
        lat.frombytes(r["lat"])
        kinds.frombytes(r["kinds"])
        qps += len(r["lat"]) // lat.itemsize / r["elapsed"]
    return lat, kinds, res[0]["kind_names"], qps


def pct_ms(values, p):
    """Nearest-rank percentile of seconds, in ms."""
    if not values:
        return None
    s = sorted(values)
    return round(s[max(0, math.ceil(p * len(s)) - 1)] * 1000.0, 3)


# ---------------------------------------------------------------------------------------

def log(msg):
    print(msg, file=sys.stderr, flush=True)


def reexec_if_needed(engines):
    """python3-xapian is Debian's: only /usr/bin/python3 can import it."""
    if "xapian" not in engines:
        return
    try:
        import xapian  # noqa: F401
        return
    except ImportError:
        pass
    if os.environ.get("SEARCHBENCH_REEXEC") or not os.path.exists(SYSTEM_PYTHON):
        sys.exit("engines.py: cannot import xapian with %s (apt-get install python3-xapian)"
                 % sys.executable)
    log("engines.py: no xapian module in %s (libsqlite %s); re-executing with %s"
        % (sys.executable, sqlite3.sqlite_version, SYSTEM_PYTHON))
    env = dict(os.environ, SEARCHBENCH_REEXEC="1", SEARCHBENCH_ORIG_PYTHON=sys.executable,
               SEARCHBENCH_ORIG_SQLITE=sqlite3.sqlite_version)
    os.execve(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:], env)


def jaccard(a, b):
    a, b = set(a), set(b)
    return 1.0 if not a and not b else len(a & b) / len(a | b)


def compare(results, args, queries):
    """Top-20 overlap of fts5 and xapian for the first queries, in article-index space."""
    rowid_to_i = {}
    with open(args.corpus, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if args.limit and i >= args.limit:
                break
            rowid_to_i[json.loads(line)["published_ms"] * 4096 + i % 4096] = i
    fts = [[rowid_to_i[r] for r in top] for top in results["fts5"]["_tops"]]
    xap = [[d - 1 for d in top] for top in results["xapian"]["_tops"]]
    js = [jaccard(a, b) for a, b in zip(fts, xap)]
    by_kind = {}
    for j, (_, kind) in zip(js, queries):
        by_kind.setdefault(kind, []).append(j)
    ca, cb = results["fts5"]["_counts"], results["xapian"]["_counts"]
    return {"engine": "compare", "queries": len(js),
            "jaccard_top20_mean": round(sum(js) / len(js), 4),
            "jaccard_top20_min": round(min(js), 4),
            "jaccard_top20_by_kind": {k: round(sum(v) / len(v), 4)
                                      for k, v in sorted(by_kind.items())},
            "identical_top20_sets": sum(1 for j in js if j == 1.0),
            "count_agree_frac": round(sum(1 for a, b in zip(ca, cb) if a == b) / len(ca), 4),
            "count_disagree_examples": [
                {"q": q, "fts5": a, "xapian": b}
                for (q, _), a, b in zip(queries, ca, cb) if a != b][:5]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--dir", required=True, help="work directory for the indexes")
    ap.add_argument("--threads", default="1,2",
                    help="worker process counts for the timed runs, e.g. 1,2")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--batch", type=int, default=1000, help="articles per transaction/commit")
    ap.add_argument("--limit", type=int, default=0, help="index only the first N articles")
    ap.add_argument("--xapian-no-fsync", action="store_true",
                    help="open the Xapian database with DB_NO_SYNC")
    ap.add_argument("--reuse", action="store_true",
                    help="keep an index built by an earlier run with the same corpus and "
                    "options (its index figures come from DIR/index-ENGINE.json)")
    args = ap.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    for e in engines:
        if e not in ENGINES:
            ap.error("unknown engine %r" % e)
    threads = [int(t) for t in args.threads.split(",") if t]
    reexec_if_needed(engines)
    os.makedirs(args.dir, exist_ok=True)
    with open(args.queries, encoding="utf-8") as f:
        queries = [(o["q"], o.get("kind", "?")) for o in map(json.loads, f)]

    env = {"python": sys.executable, "sqlite_version": sqlite3.sqlite_version,
           "orig_python": os.environ.get("SEARCHBENCH_ORIG_PYTHON", sys.executable),
           "orig_sqlite_version": os.environ.get("SEARCHBENCH_ORIG_SQLITE",
                                                 sqlite3.sqlite_version),
           "nproc": os.cpu_count()}
    log("engines.py: python %s, libsqlite %s (invoked as %s, libsqlite %s)" % (
        env["python"], env["sqlite_version"], env["orig_python"], env["orig_sqlite_version"]))

    results = {}
    for name in engines:
        version = make_engine(name, args.dir, args.batch).version()
        log("== %s %s, corpus %s" % (name, version, args.corpus))
        r = {"engine": name, "version": version}
        r.update(env)
        r["load1_start"] = round(os.getloadavg()[0], 2)
        saved = os.path.join(args.dir, "index-%s.json" % name)
        corpus = {"corpus": os.path.abspath(args.corpus), "limit": args.limit,
                  "corpus_bytes": os.path.getsize(args.corpus), "batch": args.batch,
                  "xapian_no_fsync": args.xapian_no_fsync}
        idx = None
        if args.reuse and os.path.exists(saved):
            with open(saved) as f:
                idx = json.load(f)
            if any(idx.get(k) != v for k, v in corpus.items()):
                idx = None
        r["reused_index"] = idx is not None
        if idx is None:
            idx = dict(corpus, **run_children(index_phase, [(name, args)])[0])
            with open(saved, "w") as f:
                json.dump(idx, f)
        else:
            log("  %s: reusing the index described in %s" % (name, saved))
        r.update(idx)
        log("  %s: %d articles in %.1f s (%.0f/s), disk %.1f MB -> %.1f MB after optimize"
            % (name, r["articles"], r["index_s"], r["articles_per_s"],
               r["disk_bytes_before_optimize"] / 1e6, r["disk_bytes"] / 1e6))

        chk = run_children(check_phase, [(name, args, queries)])[0]
        counts = chk["counts"]
        r["queries"] = len(queries)
        r["mean_matches"] = round(sum(counts) / len(counts), 2)
        r["median_matches"] = sorted(counts)[len(counts) // 2]
        r["zero_match_frac"] = round(sum(1 for c in counts if c == 0) / len(counts), 4)
        r["count_all_s"] = round(chk["count_s"], 3)
        r["p50_ms_nosnippet"] = pct_ms(chk["bare"], 0.50)
        r["p99_ms_nosnippet"] = pct_ms(chk["bare"], 0.99)

        for w in threads:
            log("  %s: %d worker(s) for %g s" % (name, w, args.seconds))
            lat, kinds, kind_names, qps = timed_phase(name, args, queries, w)
            r["qps_%d" % w] = round(qps, 1)
            r["n_%d" % w] = len(lat)
            r["p50_ms_%d" % w] = pct_ms(lat, 0.50)
            r["p99_ms_%d" % w] = pct_ms(lat, 0.99)
            r["max_ms_%d" % w] = pct_ms(lat, 1.0)
            r["mean_ms_%d" % w] = round(1000.0 * sum(lat) / max(1, len(lat)), 3)
            r["coverage_%d" % w] = round(min(1.0, len(lat) / len(queries)), 3)
            if w == threads[0]:
                by_kind = {}
                for k, kname in enumerate(kind_names):
                    kl = [x for x, kk in zip(lat, kinds) if kk == k]
                    kc = [c for c, (_, qk) in zip(counts, queries) if qk == kname]
                    by_kind[kname] = {"share": round(len(kc) / len(queries), 3),
                                      "p50_ms": pct_ms(kl, 0.50), "p99_ms": pct_ms(kl, 0.99),
                                      "mean_matches": round(sum(kc) / max(1, len(kc)), 1)}
                r["by_kind_%d" % w] = by_kind
        r["_counts"], r["_tops"] = counts, chk["tops"]
        results[name] = r

    lines = []
    if "fts5" in results and "xapian" in results:
        cmp_line = compare(results, args, queries)
        for r in results.values():
            r["jaccard_top20_mean"] = cmp_line["jaccard_top20_mean"]
            r["count_agree_frac"] = cmp_line["count_agree_frac"]
        lines.append(cmp_line)
    for r in results.values():
        del r["_counts"], r["_tops"]
    for line in list(results.values()) + lines:
        print(json.dumps(line), flush=True)

    log("\n%-8s %9s %8s %9s %9s %9s %8s %8s %8s %8s %8s" % (
        "engine", "art/s", "index_s", "B/art", "B/art*", "rss+MB", "qps_1", "p50_1",
        "p99_1", "qps_2", "p99_2"))
    for r in results.values():
        log("%-8s %9.0f %8.1f %9.0f %9.0f %9.0f %8s %8s %8s %8s %8s" % (
            r["engine"], r["articles_per_s"], r["index_s"], r["bytes_per_article"],
            r["bytes_per_article_before_optimize"], r["rss_growth_bytes"] / 1e6,
            r.get("qps_1", "-"), r.get("p50_ms_1", "-"), r.get("p99_ms_1", "-"),
            r.get("qps_2", "-"), r.get("p99_ms_2", "-")))
    log("(B/art: after optimize/compact, B/art*: before; latencies in ms)")
    for line in lines:
        log("top-20 Jaccard fts5 vs xapian, first %d queries: mean %.3f (min %.3f), "
            "identical sets %d; match counts agree on %.1f%% of %d queries"
            % (line["queries"], line["jaccard_top20_mean"], line["jaccard_top20_min"],
               line["identical_top20_sets"], 100 * line["count_agree_frac"], len(queries)))


if __name__ == "__main__":
    main()
