"""ab_summary.py — the summary line of an A/B study run in alternated rounds (perf/run_stories.sh,
perf/run_follows.sh): per measure, the median of the rounds without (off) and with (on) the thing
studied, and their ratio on / off.
Usage: python3 ab_summary.py JSONL SUMMARY_NAME MODE_FIELD OFF_JSON ON_JSON MEASURE...
(OFF_JSON / ON_JSON: the mode field's values as JSON, e.g. false / true or '"off"' / '"on"')"""
import json
import statistics
import sys


def main(path, name, field, off_value, on_value, *keys):
    off_value, on_value = json.loads(off_value), json.loads(on_value)
    rows = [json.loads(line) for line in open(path) if line.strip()]

    def med(mode, k):
        v = [r[k] for r in rows if r.get(field) == mode and r.get(k) is not None]
        return statistics.median(v) if v else None

    summary = {"bench": name, "rounds": sum(1 for r in rows if r.get(field) == off_value)}
    for k in keys:
        off, on = med(off_value, k), med(on_value, k)
        summary[k] = {"off": off, "on": on, "on_vs_off": round(on / off, 3) if off and on else None}
    print(json.dumps(summary))


if __name__ == "__main__":
    main(*sys.argv[1:])
