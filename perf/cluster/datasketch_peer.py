#!/usr/bin/env python3
"""datasketch_peer.py — the similarity peer of issue 22: datasketch's MinHash + MinHashLSH with
newsflow's parameters (128 permutations, 16 bands x 8 rows, threshold 0.85) on the corpus
bench_cluster --dump wrote, both engines judged by the same code against exact Jaccard.

    datasketch_peer.py CORPUS [--newsflow-line JSON]

CORPUS (bench_cluster's dump_corpus): every article's exact 3-shingle set (64-bit hashes, as
newsflow's shingler makes them) and planted group, and newsflow's candidate pairs (sharing a
band key) with its decision (MinHash estimate >= 0.85). datasketch gets the same sets: each
shingle as its 8 bytes, hashed by datasketch's own hash (sha1_hash32), so both engines see the
same items and differ only in their hashing and permutations. In corpus order, each article is
first queried (its candidates: earlier articles sharing a band) then inserted, as newsflow's
cluster stage does; a candidate pair is a match when datasketch's estimate is >= 0.85.

Ground truth: exact Jaccard >= 0.85 over the pairs that can be true (every pair inside a planted
group, and every candidate pair of either engine; any other pair is two unrelated random-word
articles, Jaccard ~0). Precision and recall of both engines' matches (and candidates) over it;
for the plot, the share of pairs that are candidates per exact-Jaccard bin against the
theoretical LSH curve 1 - (1 - s^8)^16.

Prints JSON lines: similarity.engine (one per engine: candidate pairs, matches, precision,
recall; datasketch's articles/s and CPU per article, MinHash and LSH timed together over the
shingle sets: its shingling, done by newsflow beforehand, is not in it), similarity.scurve (one
per bin), similarity.summary (the differences in percentage points and whether they are within
the issue's 1 pp). Exit 0 when both ran (the quality verdict is in the summary), 2 on bad input.
"""
import argparse
import json
import struct
import sys
import time

PERMS, BANDS, ROWS, THRESHOLD = 128, 16, 8, 0.85


def read_corpus(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"NFSHINGL":
        raise SystemExit("%s: not a bench_cluster --dump file" % path)
    (n,) = struct.unpack_from("<Q", data, 8)
    at, groups, sets = 16, [], []
    for _ in range(n):
        g, k = struct.unpack_from("<II", data, at)
        at += 8
        sets.append(struct.unpack_from("<%dQ" % k, data, at))
        at += 8 * k
        groups.append(g)
    (p,) = struct.unpack_from("<Q", data, at)
    at += 8
    pairs = {}
    for _ in range(p):
        a, b, m = struct.unpack_from("<III", data, at)
        at += 12
        pairs[(a, b)] = bool(m)
    return groups, sets, pairs


def run_datasketch(sets):
    from datasketch import MinHash, MinHashLSH
    import datasketch

    lsh = MinHashLSH(num_perm=PERMS, params=(BANDS, ROWS))
    sigs, pairs = [], {}
    items = [[s.to_bytes(8, "little") for s in shingles] for shingles in sets]
    t0, c0 = time.perf_counter(), time.process_time()
    for i, b in enumerate(items):
        m = MinHash(num_perm=PERMS)
        m.update_batch(b)
        for j in lsh.query(m):
            pairs[(j, i)] = None  # j < i: inserted before
        lsh.insert(i, m)
        sigs.append(m)
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    for (a, b) in pairs:  # the decision, outside the clock (newsflow's is inside its own)
        pairs[(a, b)] = sigs[a].jaccard(sigs[b]) >= THRESHOLD
    return pairs, secs, cpu, datasketch.__version__


def jaccard(a, b):
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter) if a or b else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus")
    ap.add_argument("--newsflow-line", help="bench_cluster's sign+lsh+unionfind JSON line")
    a = ap.parse_args()
    groups, sets, nf_pairs = read_corpus(a.corpus)
    n = len(sets)
    ds_pairs, secs, cpu, version = run_datasketch(sets)

    by_group = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    universe = set(nf_pairs) | set(ds_pairs)
    for members in by_group.values():
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                universe.add((min(members[x], members[y]), max(members[x], members[y])))
    fsets = {}

    def fs(i):
        s = fsets.get(i)
        if s is None:
            s = fsets[i] = frozenset(sets[i])
        return s

    exact = {p: jaccard(fs(p[0]), fs(p[1])) for p in universe}
    truth = {p for p, j in exact.items() if j >= THRESHOLD}

    def score(pairs):
        matched = {p for p, m in pairs.items() if m}
        tp = len(matched & truth)
        return {"candidate_pairs": len(pairs), "matched_pairs": len(matched),
                "true_pairs": len(truth),
                "precision": tp / len(matched) if matched else 1.0,
                "recall": tp / len(truth) if truth else 1.0,
                "candidate_recall": len(set(pairs) & truth) / len(truth) if truth else 1.0}

    nf, ds = score(nf_pairs), score(ds_pairs)
    nf_speed = json.loads(a.newsflow_line) if a.newsflow_line else {}
    out = [
        dict(bench="similarity.engine", engine="newsflow", articles=n, **nf,
             articles_per_s=nf_speed.get("articles_per_s"),
             cpu_ns_per_article=(1e9 / nf_speed["articles_per_s"]
                                 if nf_speed.get("articles_per_s") else None),
             timed="text -> shingles -> MinHash -> LSH + union-find, one thread"),
        dict(bench="similarity.engine", engine="datasketch", version=version, articles=n, **ds,
             articles_per_s=n / secs, cpu_ns_per_article=cpu * 1e9 / n,
             timed="shingle set -> MinHash (update_batch) -> LSH query + insert"),
    ]
    bins = [0] * 20
    nf_c, ds_c = [0] * 20, [0] * 20
    for p, j in exact.items():
        k = min(19, int(j * 20))
        bins[k] += 1
        nf_c[k] += p in nf_pairs
        ds_c[k] += p in ds_pairs
    for k in range(20):
        if bins[k]:
            s = (k + 0.5) / 20
            out.append(dict(bench="similarity.scurve", jaccard_lo=k / 20, jaccard_hi=(k + 1) / 20,
                            pairs=bins[k], newsflow=nf_c[k] / bins[k], datasketch=ds_c[k] / bins[k],
                            theory=1 - (1 - s ** ROWS) ** BANDS))
    dp, dr = 100 * (nf["precision"] - ds["precision"]), 100 * (nf["recall"] - ds["recall"])
    out.append(dict(bench="similarity.summary", articles=n, precision_pp=dp, recall_pp=dr,
                    within_1pp=abs(dp) <= 1 and abs(dr) <= 1,
                    speed_ratio=(nf_speed["articles_per_s"] / (n / secs)
                                 if nf_speed.get("articles_per_s") else None),
                    target="quality within 1 pp of datasketch"))
    for o in out:
        print(json.dumps(o, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
