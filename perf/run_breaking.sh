#!/usr/bin/env bash
# What looking for breaking news costs the read path (issue 45; engine/breaking.h; the issue's
# bound: 5 %), side by side in rounds, each round once with breaking.enabled off and once on, in
# turn so that a drift of the machine falls on both: perf/analytics/bench_readpath (decode,
# event-id dedup, trending by story, interest on 2 shards, steady state, RocksDB state with
# epochs every second, every article in a story of 3 and its topic vector in the store, as a
# crawled article's is). On, the merger reads each ranked entry's lead's topic vector from the
# last committed view (a RocksDB read per entry per window) and judges the window; off, it does
# not. events/s, CPU per event, windows and breaking-news records; then the medians and the
# ratios on / off. JSON lines to perf/results/breaking-<date>-<time>.jsonl. Nothing is judged.
#
#   perf/run_breaking.sh [--rounds N] [--events N] [--stories K]
# (perf/run_stories.sh --study breaking)
exec "$(dirname "$0")/run_stories.sh" --study breaking "$@"
