"""nfhash.py — nf_hash64 (src/algo/hash.c) and a reader's ranking variant
(src/engine/variants.h), written again from their definitions for the reference models
(feed_model.py, variants_check.py).

  python3 nfhash.py     prints the golden buckets tests/unit/engine/test_variants.c holds
"""
import sys

M64 = (1 << 64) - 1
K0, K1, K2 = 0xa0761d6478bd642f, 0xe7037ed1a0b428db, 0x8ebc6af09c88c6e3
SEED = 0x76617269616e7473  # NF_VARIANTS_SEED, "variants"
SEED_WEIGHTS = {"interest": 1.0, "follow": 0.5, "decay": 0.5, "trending": 0.1}


def mum(a, b):
    r = (a & M64) * (b & M64)
    return (r ^ (r >> 64)) & M64


def le(b):
    return int.from_bytes(b, "little")


def hash64(data, seed):
    n = len(data)
    h = seed ^ mum(seed ^ K0, n ^ K1)
    i = 0
    while i + 16 <= n:
        h = mum(le(data[i:i + 8]) ^ K1 ^ h, le(data[i + 8:i + 16]) ^ K2)
        i += 16
    if i + 8 <= n:
        h = mum(le(data[i:i + 8]) ^ K1 ^ h, K2 ^ 8)
        i += 8
    if i < n:
        h = mum(le(data[i:]) ^ K1 ^ h, K2 ^ (n - i))
    return mum(h ^ K0, n ^ K2)


def bucket(experiment, user):
    return hash64(experiment.encode() + b"\0" + user.encode(), SEED) % 100


def parse(entries):
    """ranking.variants entries -> [(name, share, weights, shadow)] (valid input only)."""
    out = []
    for e in entries:
        toks = e.split()
        w, share, shadow = dict(SEED_WEIGHTS), 0, False
        for t in toks[1:]:
            if t == "shadow":
                shadow = True
            else:
                k, v = t.split("=")
                if k == "share":
                    share = int(v)
                else:
                    w[k] = float(v)
        out.append((toks[0], share, w, shadow))
    return out or [("seed", 100, dict(SEED_WEIGHTS), False)]


def parse_spec(spec):
    """ranking.variants as --set gives it (entries comma-separated) -> parse()'s list."""
    return parse([e.strip() for e in spec.split(",") if e.strip()])


def assign(variants, experiment, user):
    b, cum = bucket(experiment, user), 0
    for name, share, w, shadow in variants:
        if shadow:
            continue
        cum += share
        if b < cum:
            return name, w
    raise ValueError("shares do not add up to 100")


GOLDEN = ["demo-user-0", "demo-user-1", "reader-42", "", "a", "abcdefgh", "abcdefghijklmnop",
          "a-reader-whose-id-is-longer-than-thirty-two-bytes", "zoë"]

if __name__ == "__main__":
    print(", ".join('{"%s", %d}' % (u, bucket("default", u)) for u in GOLDEN))
    sys.exit(0)
