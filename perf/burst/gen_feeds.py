#!/usr/bin/env python3
"""gen_feeds.py DIR [FEEDS] [PER_FEED] — the burst of issue 36: FEEDS local RSS files (default
200) of PER_FEED articles each (default 250), all new at once, and DIR/sources.txt listing them.

Each article is a title of 8 and a body of 150-250 words drawn from a vocabulary of 30,000
made-up words, published within the last hour (so every one is new and clustered). One in ten
is a near-duplicate of an earlier article of another feed (a few words changed, another URL),
so the story-cluster index joins some. Deterministic (seeded): the same files every run."""
import os
import random
import sys
import time
from datetime import datetime, timezone


def rfc822(ms):
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")


def word(rng):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    nfeeds = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    per = int(sys.argv[3]) if len(sys.argv) > 3 else 250
    rng = random.Random(36)
    vocab = [word(rng) for _ in range(30000)]
    now = int(time.time() * 1000)
    os.makedirs(out, exist_ok=True)
    made = []  # (title words, body words) of earlier articles, for near-duplicates
    with open(os.path.join(out, "sources.txt"), "w") as src:
        for f in range(nfeeds):
            name = "burst-%03d.rss" % f
            src.write(name + "\n")
            with open(os.path.join(out, name), "w") as x:
                x.write('<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel>'
                        "<title>Burst %d</title><link>https://burst%d.example.com/</link>"
                        "<description>generated</description>\n" % (f, f))
                for i in range(per):
                    if made and rng.random() < 0.1:
                        t, b = rng.choice(made)
                        b = list(b)
                        for _ in range(rng.randint(1, 4)):
                            b[rng.randrange(len(b))] = rng.choice(vocab)
                    else:
                        t = [rng.choice(vocab) for _ in range(8)]
                        b = [rng.choice(vocab) for _ in range(rng.randint(150, 250))]
                        if len(made) < 5000:
                            made.append((t, b))
                    ms = now - rng.randint(60 * 1000, 3600 * 1000)
                    x.write("<item><title>%s</title><link>https://burst%d.example.com/a/%d</link>"
                            "<pubDate>%s</pubDate><description>%s.</description></item>\n"
                            % (" ".join(t).capitalize(), f, i, rfc822(ms), " ".join(b)))
                x.write("</channel></rss>\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
