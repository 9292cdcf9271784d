#!/usr/bin/env bash
# deploy/docker-compose.yml, the production shape on one host (issue 43), checked without a
# Docker engine: every NEWSFLOW_* variable of every newsflow container (the 3 job processes, the
# topics step, the PostgreSQL sink) is a real key with a valid value (`newsflow config check`
# with the image's config file); the processes have distinct transactional ids and advertised
# URLs that name their own service; the brokers form one KRaft quorum (distinct node ids, every
# voter a broker, each advertising its own name) that can hold exactly-once's replicated logs;
# the seccomp profile the processes name exists; Prometheus's configuration (promtool, with
# the rules mounted as the file mounts them) scrapes exactly the processes' probe listeners and
# the sink; Grafana's provisioning loads the six dashboards from where they are mounted.
# $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
D="$SRC/deploy"
mkdir -p "$TMP/prom"
cp "$D/compose/prometheus.yml" "$TMP/prom/prometheus.yml"
cp "$D/prometheus/alerts.yml" "$D/prometheus/slo.yml" "$TMP/prom/"
promtool check config "$TMP/prom/prometheus.yml" >"$TMP/promtool" 2>&1 ||
  { cat "$TMP/promtool" >&2; fail "promtool check config (deploy/compose/prometheus.yml)"; }
python3 - "$D" "$NF" "$SRC" "$TMP" <<'PY' || fail "deploy/docker-compose.yml"
import glob, json, os, subprocess, sys
import yaml
d, nf, src, tmp = sys.argv[1:]
c = yaml.safe_load(open(os.path.join(d, "docker-compose.yml")))
svc = c["services"]
image_config = os.path.join(src, "config", "newsflow.json")

def config_check(name, env, args=()):
    e = {"PATH": os.environ["PATH"]}
    e.update({k: str(v) for k, v in env.items()})
    bad = [k for k in env if not k.startswith("NEWSFLOW_")]
    assert not bad, (name, bad)
    p = subprocess.run([nf, "config", "check", image_config, *args], env=e,
                       capture_output=True, text=True)
    assert p.returncode == 0, (name, p.stderr[-600:])

jobs = {n: s for n, s in svc.items() if n.startswith("newsflow-")}
assert sorted(jobs) == ["newsflow-1", "newsflow-2", "newsflow-3"], sorted(jobs)
txids, urls, probes = set(), set(), set()
for n, s in jobs.items():
    env = s["environment"]
    config_check(n, env)
    assert env["NEWSFLOW_KAFKA_ASSIGNMENT"] == "group" and env["NEWSFLOW_STATE_CHANGELOG"] == "true", n
    txids.add(env["NEWSFLOW_KAFKA_TRANSACTIONAL_ID"])
    url = env["NEWSFLOW_SERVE_ADVERTISED_URL"]
    assert url == "http://%s:%s" % (n, env["NEWSFLOW_ADMIN_PORT"]), (n, url)
    urls.add(url)
    probes.add("%s:%s" % (n, env["NEWSFLOW_ADMIN_PROBE_PORT"]))
    assert any(p.endswith(":" + env["NEWSFLOW_ADMIN_PORT"]) for p in s["ports"]), (n, s["ports"])
    assert env["NEWSFLOW_ADMIN_PROBE_PORT"] in " ".join(s["healthcheck"]["test"]), n
    [so] = s["security_opt"]
    assert so.startswith("seccomp=") and os.path.isfile(os.path.join(d, so[8:])), so
    assert s["depends_on"]["topics"]["condition"] == "service_completed_successfully", n
assert len(txids) == 3 and len(urls) == 3, (txids, urls)

config_check("topics", svc["topics"]["environment"])
assert svc["topics"]["command"][:2] == ["topics", "create"], svc["topics"]["command"]
for n in ("pgsink-migrate", "pgsink"):
    config_check(n, svc[n]["environment"])
    assert svc[n]["command"][:2] == ["sink", "postgres"], n

# One KRaft quorum of three brokers that can replicate the transaction log.
brokers = {n: s["environment"] for n, s in svc.items() if n.startswith("kafka-")}
ids = {int(e["KAFKA_NODE_ID"]) for e in brokers.values()}
assert len(brokers) == 3 and len(ids) == 3, brokers.keys()
for n, e in brokers.items():
    voters = {v.split("@")[1].split(":")[0]: int(v.split("@")[0])
              for v in e["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")}
    assert voters == {b: int(brokers[b]["KAFKA_NODE_ID"]) for b in brokers}, (n, voters)
    assert e["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://%s:9092" % n, n
    assert int(e["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"]) <= len(brokers), n
    assert int(e["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"]) < int(e["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"]), n
assert svc["newsflow-1"]["environment"]["NEWSFLOW_KAFKA_BROKERS"] == ",".join(
    "%s:9092" % b for b in sorted(brokers)), svc["newsflow-1"]["environment"]

# Prometheus scrapes the processes' probe listeners and the sink's admin port.
prom = yaml.safe_load(open(os.path.join(d, "compose", "prometheus.yml")))
targets = {j["job_name"]: set(sum((sc["targets"] for sc in j["static_configs"]), []))
           for j in prom["scrape_configs"]}
assert targets["newsflow"] == probes, (targets, probes)
assert targets["newsflow-sink"] == {"pgsink:%s" % svc["pgsink"]["environment"]["NEWSFLOW_ADMIN_PORT"]}, targets
mounts = dict(v.split(":")[:2] for v in svc["prometheus"]["volumes"])
assert mounts["./compose/prometheus.yml"] == "/etc/prometheus/prometheus.yml", mounts
assert mounts["./prometheus/alerts.yml"] == "/etc/prometheus/alerts.yml", mounts
assert mounts["./prometheus/slo.yml"] == "/etc/prometheus/slo.yml", mounts

# Grafana: the data source and the six dashboards, where they are mounted.
gm = dict(v.split(":")[:2] for v in svc["grafana"]["volumes"])
prov = yaml.safe_load(open(os.path.join(d, "grafana", "provisioning", "dashboards", "newsflow.yml")))
[p] = prov["providers"]
assert gm["./grafana"] == p["options"]["path"], (gm, p)
dash = sorted(glob.glob(os.path.join(d, "grafana", "newsflow-*.json")))
assert len(dash) == 6, dash
for f in dash:
    dj = json.load(open(f))
    assert dj.get("uid") and dj.get("panels"), f
ds = yaml.safe_load(open(os.path.join(d, "grafana", "provisioning", "datasources", "prometheus.yml")))
assert ds["datasources"][0]["type"] == "prometheus" and ds["datasources"][0]["url"] == "http://prometheus:9090", ds
print("compose: 3 brokers, 3 processes (%s), topics, sink, Prometheus (%d targets), Grafana (%d dashboards)"
      % (", ".join(sorted(txids)), sum(len(t) for t in targets.values()), len(dash)))
PY
pass "deploy/docker-compose.yml: valid environments, distinct identities, one quorum, scrape targets, dashboards"
