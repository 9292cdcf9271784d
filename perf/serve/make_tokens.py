#!/usr/bin/env python3
"""Tokens for perf/run_auth.sh: JWTs for one reader (sub), exp 30 days ahead, written to OUT/

    hs256.txt   one HS256 token (the bytes of --secret, a trailing newline stripped, as the job
                reads auth.hs256_secret_file)
    rs256.txt   one RS256 token, signed by `openssl dgst -sha256 -sign` with --rsa-key
    forged.txt  hs256.txt with its signature's first character changed (refused: 401)
    pool.txt    --pool HS256 tokens, one a line, differing by their jti

and prints one JSON object: the share of the pool's requests the job's cache of verified tokens
(src/serve/auth.c: 4,096 slots, direct-mapped by the first two bytes of the token's SHA-256)
should still answer when wrk's threads cycle through the pool from their offsets (run_auth.sh
gives thread k of T the offset k/T of the pool), simulated over ten cycles after the first.
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import subprocess
import time

CACHE_SLOTS = 4096


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def signing_input(alg, sub, exp, jti=None):
    head = {"alg": alg, "typ": "JWT"}
    body = {"sub": sub, "iat": int(time.time()), "exp": exp}
    if jti is not None:
        body["jti"] = str(jti)
    return (b64url(json.dumps(head, separators=(",", ":")).encode()) + "." +
            b64url(json.dumps(body, separators=(",", ":")).encode()))


def hs256(secret, si):
    return si + "." + b64url(hmac.new(secret, si.encode(), hashlib.sha256).digest())


def rs256(key_file, si):
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key_file], input=si.encode(),
                         capture_output=True, check=True).stdout
    return si + "." + b64url(sig)


def cache_hits(tokens, threads, cycles=10):
    """The share of requests a direct-mapped cache answers, threads interleaved one by one."""
    slot_of = [(lambda h: (h[0] | h[1] << 8) % CACHE_SLOTS)(hashlib.sha256(t.encode()).digest())
               for t in tokens]
    n = len(tokens)
    cache = [None] * CACHE_SLOTS
    pos = [k * n // threads for k in range(threads)]
    hits = total = 0
    for step in range((cycles + 1) * n):
        k = step % threads
        i = pos[k]
        pos[k] = (i + 1) % n
        s = slot_of[i]
        if step >= n * threads:  # past the first cycle of every thread
            total += 1
            hits += cache[s] == i
        cache[s] = i
    return hits / total if total else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--secret", required=True)
    ap.add_argument("--rsa-key", required=True)
    ap.add_argument("--sub", required=True)
    ap.add_argument("--pool", type=int, default=10000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    secret = open(a.secret, "rb").read()
    secret = secret[:-2] if secret.endswith(b"\r\n") else secret[:-1] if secret.endswith(b"\n") else secret
    exp = int(time.time()) + 30 * 86400
    hs = hs256(secret, signing_input("HS256", a.sub, exp))
    rs = rs256(a.rsa_key, signing_input("RS256", a.sub, exp))
    head, body, sig = hs.split(".")
    forged = head + "." + body + "." + ("B" if sig[0] == "A" else "A") + sig[1:]
    pool = [hs256(secret, signing_input("HS256", a.sub, exp, jti)) for jti in range(a.pool)]
    for name, text in (("hs256.txt", hs), ("rs256.txt", rs), ("forged.txt", forged),
                       ("pool.txt", "\n".join(pool))):
        with open(os.path.join(a.out, name), "w") as f:
            f.write(text + "\n")
    print(json.dumps({"pool_cache_hits_expected": round(cache_hits(pool, a.threads), 4),
                      "cache_slots": CACHE_SLOTS}))


if __name__ == "__main__":
    main()
