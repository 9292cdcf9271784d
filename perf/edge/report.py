#!/usr/bin/env python3
"""The markdown report of perf/run_edge.sh from its JSON lines (results.jsonl): one table row per
server, then newsflow against the better Koa variant. perf/README.md ("HTTP edge and
authentication") explains the columns.

    python3 perf/edge/report.py build-perf/edge/results.jsonl > report.md
"""
import json
import sys

LABELS = {
    "koa": "Koa + kafkajs, one send per request",
    "koa-coal": "Koa + kafkajs, coalesced sends (`--coalesce`)",
    "newsflow": "newsflow ingest",
}


def fmt(v, digits=0):
    if v is None:
        return "—"
    if isinstance(v, float) and digits:
        return f"{v:,.{digits}f}"
    return f"{round(v):,}"


def main(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    env = next((r for r in rows if r.get("bench") == "edge_env"), {})
    servers = [r for r in rows if r.get("bench") == "edge_server"]
    out = []
    out.append("## HTTP ingest edge: POST /v1/events through Apache Kafka")
    out.append("")
    out.append(
        f"Run of {env.get('date', '?')} on commit {env.get('commit', '?')}: {env.get('cpus', '?')} CPUs "
        f"({env.get('cpu_model', '?')}), 1-minute load {env.get('load1', '?')} at the start, node "
        f"{env.get('node', '?')}. One Apache Kafka 4.4 node (topic read-events, 6 partitions); every "
        f"server produces with an idempotent producer and acks=all and answers 202 once the broker "
        f"has each accepted event. Load: wrk, 1 thread, {env.get('conns', '?')} connections, batches of "
        f"{env.get('batch', '?')} events (a JSON array, perf/edge/events.lua), {env.get('seconds', '?')} s "
        f"measured after {env.get('warmup', '?')} s of warm-up. Pinned with taskset: server on CPU "
        f"{env.get('server_cpus', '?')}, wrk on CPU {env.get('load_cpus', '?')}, broker on CPU "
        f"{env.get('broker_cpus', '?')}.")
    out.append("")
    out.append("| server | events/s | p50 ms | p99 ms | non-202 | server CPU (cores) | CPU µs/event "
               "| events/s per core | wrk CPU (cores) | broker CPU (cores) | topic check |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in servers:
        label = LABELS.get(r["name"], r["name"])
        if "skipped" in r:
            out.append(f"| {label} | skipped: {r['skipped']} |||||||||| ")
            continue
        if "error" in r:
            out.append(f"| {label} | failed: {r['error']} |||||||||| ")
            continue
        check = (f"ok: +{r['topic_grown']:,} records ≥ {r['accepted_total']:,} accepted"
                 if r["topic_ok"] else f"**FAILED**: +{r['topic_grown']:,} < {r['accepted_total']:,}")
        non = r["non_202"] + r["socket_errors"]
        out.append(
            f"| {label} | {fmt(r['events_per_s'])} | {fmt(r['p50_ms'], 1)} | {fmt(r['p99_ms'], 1)} "
            f"| {non:,} | {r['server_cores']:.2f} | {fmt(r['cpu_us_per_event'], 1)} "
            f"| {fmt(r['events_per_core_s'])} | {r['wrk_cores']:.2f} | {r['broker_cores']:.2f} | {check} |")
    out.append("")
    ran = {r["name"]: r for r in servers if "events_per_core_s" in r and r["events_per_core_s"]}
    koas = [ran[n] for n in ("koa", "koa-coal") if n in ran]
    best = max(koas, key=lambda r: r["events_per_core_s"]) if koas else None
    nf = ran.get("newsflow")
    if nf and best:
        ratio = nf["events_per_core_s"] / best["events_per_core_s"]
        out.append(
            f"**newsflow / Koa** (against {LABELS[best['name']]}, the better Koa per core): "
            f"**{ratio:.1f}×** the events/s per core (target ≥ 10× — {'met' if ratio >= 10 else 'NOT met'}), "
            f"{nf['events_per_s'] / best['events_per_s']:.1f}× the events/s, p99 {nf['p99_ms']:.1f} ms "
            f"against {best['p99_ms']:.1f} ms.")
    elif best:
        out.append(f"newsflow did not run, so no ratio; the better Koa per core: {LABELS[best['name']]}, "
                   f"{best['events_per_core_s']:,} events/s per core.")
    out.append("")
    for r in servers:
        for n in r.get("notes", []):
            out.append(f"- {LABELS.get(r['name'], r['name'])}: **{n}**")
        if "wrk_cores" in r and r["wrk_cores"] > 0.8:
            out.append(f"- {LABELS.get(r['name'], r['name'])}: wrk used {r['wrk_cores']:.2f} of its CPU: "
                       "the generator may be what limits this row.")
        label = LABELS.get(r["name"], r["name"])
        other = r.get("other_on_server_cpu_cores", 0)
        if "server_cores" in r and r["server_cores"] < 0.85:
            out.append(f"- {label}: the server ran {r['server_cores']:.2f} of its CPU, other work on the shared "
                       f"machine {other:.2f} (unpinned processes take what the server leaves idle, and may take "
                       "some it needed): its events/s are bounded by waiting — on the broker's acknowledgements "
                       "or for the CPU — not by its own CPU; its events/s per core is the figure to compare.")
        elif other >= 0.05:
            out.append(f"- {label}: other work on the shared machine took {other:.2f} of the server's CPU "
                       "meanwhile; its events/s may be lower for it, its CPU µs/event hardly.")
    print("\n".join(out).rstrip() + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
