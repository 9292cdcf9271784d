"""ab_row.py — one round's row of an A/B study over perf/run_query.sh (perf/run_variants.sh,
perf/run_follows.sh): the feed's requests/s, p99, the read events ingested meanwhile and the
job's CPU per feed request, from run_query.sh's JSON lines, with the mode and round.
Usage: python3 ab_row.py RUN_QUERY_OUTPUT BENCH MODE_FIELD MODE_JSON ROUND"""
import json
import sys


def main(path, bench, field, mode, rnd):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    get = lambda n: next((x for x in rows if x.get("bench") == n or x.get("name") == n), {})
    s, feed = get("query_summary"), get("feed")
    print(json.dumps({"bench": bench, "round": int(rnd), field: json.loads(mode),
                      "feed_requests_per_s": s.get("feed_requests_per_s"),
                      "feed_p99_ms": s.get("feed_p99_ms"),
                      "events_per_s_during_feed": s.get("events_per_s_during_feed"),
                      "job_cpu_us_per_feed": feed.get("job_cpu_us_per_request")}))


if __name__ == "__main__":
    main(*sys.argv[1:])
