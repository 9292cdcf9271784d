#!/usr/bin/env python3
"""Deterministic generator of a news-like corpus and query list for the search benchmark.

Usage:
    perf/search/gen_corpus.py --articles 200000 --out /tmp/searchbench/corpus.jsonl \
        --queries /tmp/searchbench/queries.jsonl --nqueries 2000 [--seed 1] [--now-ms MS]

Corpus (--out), one JSON object per line, in published_ms order (a stream):
    {"id": "<32 hex>", "title": str, "summary": str, "source_id": str,
     "published_ms": int, "topics": [int, ...]}
  - vocabulary: ~20,000 pronounceable made-up words, shorter words tending to rank higher,
    drawn with a Zipf distribution (s = --zipf-s, default 1.0); 35% of all tokens are one of
    50 common English stopwords (Zipf among themselves);
  - title 6-12 words (first letter capitalised), summary 30-60 words ending with '.', cut at a
    word so that it is at most 300 bytes;
  - published_ms uniform over the 7 days before --now-ms, sorted; 1-3 topics in 0..29;
    source_id one of 500 sources (Zipf).

Queries (--queries), one JSON object per line: {"q": "...", "kind": "..."}; syntax: words,
"quoted phrases", -exclusion. "rank" is the rank in the made-up vocabulary (0 = most frequent).
    40% two     two words of rank 200-5000 taken from one generated article (so >= 1 hit)
    25% one     one word, rank uniform in 50-2000
    15% phrase  a quoted pair of adjacent words from a generated title
    10% exclude a word of rank 50-2000 and -word of rank 20-500
    10% three   three words of rank 50-5000 taken from one generated article
The corpus is the same whether or not --queries is given (queries use their own RNG).
Python 3 standard library only; 1M articles take about 25 s (one core).
"""

import argparse
import itertools
import json
import random
import sys
import time

STOPWORDS = (
    "the of and to a in for is on that by this with you it not or be are from at as your "
    "all have new more an was we will can us about if my has but our one other do no they "
    "he up what which their out"
).split()
assert len(STOPWORDS) == 50

ONSETS = ("b c d f g h j k l m n p r s t v w z br cr dr fr gr kr pr tr bl cl fl gl pl "
          "sl st sk sp sh ch th").split()
VOWELS = "a e i o u a e i o u ai ea ou io".split()
CODAS = [""] * 6 + "n r s l m t k nd rt".split()

DAY_MS = 86_400_000
STOPWORD_SHARE = 0.35
NSOURCES = 500
CHUNK = 10_000  # articles generated per bulk random.choices() call


def make_vocab(rng, size):
    """Return `size` unique made-up words, ordered by rank (short words tend to rank first)."""
    words = set()
    stop = set(STOPWORDS)
    while len(words) < size:
        nsyl = rng.choice((1, 2, 2, 2, 3, 3, 3, 4))
        w = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS)
                    for _ in range(nsyl))
        if 3 <= len(w) <= 14 and w not in stop:
            words.add(w)
    keyed = sorted((len(w) + 4.0 * rng.random(), w) for w in sorted(words))
    return [w for _, w in keyed]


def zipf_weights(n, s):
    return [1.0 / (r + 1) ** s for r in range(n)]


def build_population(vocab, s):
    """Tokens (stopwords + vocab) with cumulative weights for random.choices()."""
    sw = zipf_weights(len(STOPWORDS), s)
    vw = zipf_weights(len(vocab), s)
    ksw = STOPWORD_SHARE / sum(sw)
    kvw = (1.0 - STOPWORD_SHARE) / sum(vw)
    weights = [w * ksw for w in sw] + [w * kvw for w in vw]
    return STOPWORDS + vocab, list(itertools.accumulate(weights))


def cut_summary(words, limit=300):
    """Join words into a sentence of at most `limit` bytes (ASCII), cut at a word."""
    s = " ".join(words)
    if len(s) + 1 > limit:
        s = s[:s.rfind(" ", 0, limit)]  # rfind stays below limit, so '.' still fits
    return s[0].upper() + s[1:] + "."


def pick_words(rng, words, rank, lo, hi, k):
    """k distinct words of `words` whose vocabulary rank is in [lo, hi], or None."""
    cands = sorted({w for w in words if lo <= rank.get(w, -1) <= hi})
    if len(cands) < k:
        return None
    return rng.sample(cands, k)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--articles", type=int, default=200_000)
    ap.add_argument("--out", help="corpus JSONL to write")
    ap.add_argument("--queries", help="query JSONL to write")
    ap.add_argument("--nqueries", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--now-ms", type=int, default=1_764_000_000_000)
    ap.add_argument("--vocab", type=int, default=20_000)
    ap.add_argument("--zipf-s", type=float, default=1.0)
    args = ap.parse_args()
    if not args.out and not args.queries:
        ap.error("nothing to do: give --out and/or --queries")
    n = args.articles
    t0 = time.monotonic()

    rng = random.Random(args.seed)
    vocab = make_vocab(rng, args.vocab)
    rank = {w: r for r, w in enumerate(vocab)}
    population, cum = build_population(vocab, args.zipf_s)
    src_cum = list(itertools.accumulate(zipf_weights(NSOURCES, 1.0)))
    sources = ["src-%03d" % i for i in range(NSOURCES)]
    span = 7 * DAY_MS
    start_ms = args.now_ms - span
    published = sorted(start_ms + int(rng.random() * span) for _ in range(n))

    # Query plan, drawn from its own RNG so that the corpus never depends on it.
    qrng = random.Random("%d-queries" % args.seed)
    k = args.nqueries if args.queries else 0
    shares = [("two", 0.40), ("one", 0.25), ("phrase", 0.15), ("exclude", 0.10),
              ("three", 0.10)]
    counts = [int(round(k * f)) for _, f in shares]
    counts[0] += k - sum(counts)
    kinds = [name for (name, _), c in zip(shares, counts) for _ in range(c)]
    qrng.shuffle(kinds)
    # Articles whose words the "phrase"/"two"/"three" queries take (index -> query slots).
    wanted = {}
    for qi, kind in enumerate(kinds):
        if kind in ("phrase", "two", "three") and n > 0:
            wanted.setdefault(qrng.randrange(n), []).append(qi)
    captured = {}

    out = open(args.out, "w", encoding="utf-8") if args.out else None
    dumps = json.dumps
    for base in range(0, n, CHUNK):
        m = min(CHUNK, n - base)
        tlen = [rng.randint(6, 12) for _ in range(m)]
        slen = [rng.randint(30, 60) for _ in range(m)]
        toks = rng.choices(population, cum_weights=cum, k=sum(tlen) + sum(slen))
        srcs = rng.choices(sources, cum_weights=src_cum, k=m)
        pos = 0
        lines = []
        for j in range(m):
            i = base + j
            tw = toks[pos:pos + tlen[j]]
            pos += tlen[j]
            sw = toks[pos:pos + slen[j]]
            pos += slen[j]
            title = " ".join(tw)
            title = title[0].upper() + title[1:]
            summary = cut_summary(sw)
            if i in wanted:
                captured[i] = (tw, summary[:-1].lower().split())
            art = {
                "id": "%032x" % rng.getrandbits(128),
                "title": title,
                "summary": summary,
                "source_id": srcs[j],
                "published_ms": published[i],
                "topics": rng.sample(range(30), rng.randint(1, 3)),
            }
            lines.append(dumps(art))
        if out:
            out.write("\n".join(lines))
            out.write("\n")
    if out:
        out.close()
    t1 = time.monotonic()

    if args.queries:
        slots = {}
        for i, qis in wanted.items():
            for qi in qis:
                slots[qi] = i
        stop = set(STOPWORDS)
        with open(args.queries, "w", encoding="utf-8") as f:
            for qi, kind in enumerate(kinds):
                q = None
                if kind == "phrase":
                    tw = captured[slots[qi]][0]
                    pairs = [(a, b) for a, b in zip(tw, tw[1:])
                             if a not in stop or b not in stop]
                    a, b = qrng.choice(pairs or list(zip(tw, tw[1:])))
                    q = '"%s %s"' % (a, b)
                elif kind in ("two", "three"):
                    tw, sw = captured[slots[qi]]
                    words = [w.lower() for w in tw] + sw
                    lo, hi, nw = (200, 5000, 2) if kind == "two" else (50, 5000, 3)
                    picked = pick_words(qrng, words, rank, lo, hi, nw)
                    if picked is None:  # article too poor in such words: random ranks
                        picked = [vocab[r] for r in qrng.sample(range(lo, hi + 1), nw)]
                    q = " ".join(picked)
                elif kind == "one":
                    q = vocab[qrng.randint(50, 2000)]
                elif kind == "exclude":
                    q = "%s -%s" % (vocab[qrng.randint(50, 2000)], vocab[qrng.randint(20, 500)])
                f.write(json.dumps({"q": q, "kind": kind}) + "\n")

    print("gen_corpus: %d articles in %.1f s%s%s" % (
        n, t1 - t0, (" -> " + args.out) if args.out else "",
        (", %d queries -> %s" % (k, args.queries)) if args.queries else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
