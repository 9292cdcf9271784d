#!/usr/bin/env bash
# The production topology as code (issue 43): deploy/helm/newsflow rendered by Helm
# (`helm lint`, `helm template` with the defaults and with every option on) and every object
# decoded strictly into its Kubernetes API type (deploy/check: an unknown or misspelt field is
# an error — shown by misspelling one); every NEWSFLOW_* variable of every container is a real
# configuration key with a valid value (`newsflow config check` in that environment, each pod's
# $(POD_NAME) substituted); the replicas get distinct transactional ids and advertised URLs;
# the probes ask /healthz and /readyz on the port the job's probe listener takes from the same
# environment, and the binary answers them there; deploy/seccomp/newsflow.json is the runtime
# default plus io_uring's three syscalls, the job runs under it (tests/tools/seccomp_run.c
# applies it) and, under the default alone, refuses to start with a message naming seccomp.
# $1 = newsflow binary, $2 = source dir.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
SECCOMP_RUN="$(dirname "$NF")/tests/nf_seccomp_run"
[ -x "$SECCOMP_RUN" ] || fail "$SECCOMP_RUN is missing: install libseccomp-dev (scripts/deps.sh) and build again"
HELM=$(bash "$SRC/scripts/deploy-tools.sh" helm) || fail "no Helm (scripts/deploy-tools.sh)"
CHECK=$(bash "$SRC/scripts/deploy-tools.sh" check) || fail "no deploy/check (scripts/deploy-tools.sh)"
CHART="$SRC/deploy/helm/newsflow"

"$HELM" lint "$CHART" >"$TMP/lint" 2>&1 || { cat "$TMP/lint" >&2; fail "helm lint"; }
"$HELM" template newsflow "$CHART" >"$TMP/default.yaml" 2>"$TMP/err" || fail "helm template (defaults)"
"$HELM" template nf "$CHART" --namespace news --set replicas=5 --set autoscaling.enabled=true \
  --set sink.enabled=true --set sink.readEvents=true \
  --set 'sources={https://a.example/rss,https://b.example/feed.atom}' \
  --set 'kafka.properties={security.protocol=SSL,client.rack=r1}' --set kafka.topicPrefix=prod. \
  >"$TMP/full.yaml" 2>"$TMP/err" || fail "helm template (every option)"
for r in default full; do
  "$CHECK" manifests "$TMP/$r.yaml" >"$TMP/$r.jsonl" 2>"$TMP/err" || fail "strict decoding of the $r rendering: $(cat "$TMP/err")"
done
grep -q '"kind":"StatefulSet"' "$TMP/default.jsonl" && grep -q '"kind":"Job"' "$TMP/default.jsonl" ||
  fail "the rendering lacks the StatefulSet or the topics Job"
grep -c '^apiVersion: autoscaling/v2' "$TMP/full.yaml" >/dev/null || fail "no HPA with autoscaling.enabled"
# deploy/k8s/newsflow.yaml is the chart's default rendering, for kubectl users.
tail -n +6 "$SRC/deploy/k8s/newsflow.yaml" | cmp -s - "$TMP/default.yaml" ||
  fail "deploy/k8s/newsflow.yaml differs from the chart's rendering: regenerate it (its header says how)"
# The checker is strict: a misspelt field, an unknown kind and a wrong type are errors.
sed 's/readinessProbe:/readinesProbe:/' "$TMP/default.yaml" >"$TMP/typo.yaml"
! "$CHECK" manifests "$TMP/typo.yaml" >/dev/null 2>"$TMP/err" || fail "a misspelt field passed"
grep -q 'unknown field.*readinesProbe' "$TMP/err" || fail "the misspelt field is not named: $(cat "$TMP/err")"
sed 's/^kind: PodDisruptionBudget/kind: PodDisruptionBudgets/' "$TMP/default.yaml" >"$TMP/kind.yaml"
! "$CHECK" manifests "$TMP/kind.yaml" >/dev/null 2>&1 || fail "an unknown kind passed"
sed 's/replicas: 3/replicas: three/' "$TMP/default.yaml" >"$TMP/type.yaml"
! "$CHECK" manifests "$TMP/type.yaml" >/dev/null 2>&1 || fail "a wrong type passed"
pass "helm lint and template; every object decodes strictly into its Kubernetes type (and a typo does not)"

# Every container's NEWSFLOW_* environment, as each replica gets it, through `config check`.
python3 - "$TMP" "$NF" "$SRC" <<'PY' || fail "the manifests' environment"
import json, os, re, subprocess, sys
tmp, nf, src = sys.argv[1:]
image_config = os.path.join(src, "config", "newsflow.json")  # the image's NEWSFLOW_CONFIG
for r in ("default", "full"):
    lines = [json.loads(l) for l in open(os.path.join(tmp, r + ".jsonl"))]
    cms = {l["name"]: l["data"] for l in lines if l["kind"] == "ConfigMap"}
    txids, urls = set(), set()
    kinds = {l["kind"] for l in lines}
    assert r == "default" or "Deployment" in kinds, kinds  # the sink, when enabled
    for c in (l for l in lines if l["kind"] in ("StatefulSet", "Deployment", "Job")):
        pods = ["%s-%d" % (c["name"], i) for i in range(c["replicas"])] if c["kind"] == "StatefulSet" else [c["name"]]
        for pod in pods:
            env = {"PATH": os.environ["PATH"]}
            fields = {"POD_NAME": pod, "POD_NAMESPACE": "news"}
            for k, v in c["env"].items():
                if not k.startswith("NEWSFLOW_"):
                    assert v.startswith("fieldRef:"), (k, v)
                    continue
                if v.startswith("secretKeyRef:"):  # the operator's Secret: a DSN here
                    assert k == "NEWSFLOW_POSTGRES_DSN", (k, v)
                    v = "host=127.0.0.1 dbname=news"
                env[k] = re.sub(r"\$\((\w+)\)", lambda m: fields[m.group(1)], v)
            f = env.get("NEWSFLOW_SOURCES_FILE", "")
            if f:  # the ConfigMap's file, as the pod mounts it
                path = os.path.join(tmp, "sources-%s.txt" % r)
                open(path, "w").write(cms["%s-sources" % c["name"]]["sources.txt"])
                env["NEWSFLOW_SOURCES_FILE"] = path
            p = subprocess.run([nf, "config", "check", image_config], env=env, capture_output=True, text=True)
            assert p.returncode == 0, (r, pod, p.stderr[-600:])
            if c["kind"] == "StatefulSet":
                txids.add(env["NEWSFLOW_KAFKA_TRANSACTIONAL_ID"])
                urls.add(env["NEWSFLOW_SERVE_ADVERTISED_URL"])
                assert env["NEWSFLOW_KAFKA_ASSIGNMENT"] == "group" and env["NEWSFLOW_STATE_CHANGELOG"] == "true", env
                ports, probes = c["ports"], c["probes"]
                assert ports["admin"] == int(env["NEWSFLOW_ADMIN_PORT"]), (ports, env)
                assert ports["probe"] == int(env["NEWSFLOW_ADMIN_PROBE_PORT"]), (ports, env)
                assert ports["operator"] == int(env["NEWSFLOW_ADMIN_OPERATOR_PORT"]), (ports, env)
                assert probes == {"startup": "/healthz@probe", "liveness": "/healthz@probe",
                                  "readiness": "/readyz@probe"}, probes
                assert c["seccomp"] == "Localhost:profiles/newsflow.json", c["seccomp"]
            elif c["kind"] == "Deployment":  # the sink: probes on its admin port
                assert c["args"] == ["sink", "postgres"], c["args"]
                assert c["ports"]["admin"] == int(env["NEWSFLOW_ADMIN_PORT"]), (c, env)
                assert c["probes"] == {"liveness": "/healthz@admin", "readiness": "/readyz@admin"}, c
            else:
                assert c["args"][:2] in (["topics", "create"], ["sink", "postgres"]), c["args"]
        if c["kind"] == "StatefulSet":
            assert len(txids) == c["replicas"] and len(urls) == c["replicas"], (txids, urls)
            print("%s: %d replicas, distinct transactional ids %s" % (r, c["replicas"], sorted(txids)))
PY
pass "every NEWSFLOW_* variable is a valid key for every replica; distinct transactional ids and URLs"

# The probes against the binary: the manifest's admin and probe settings (on free ports), the
# embedded broker instead of the cluster's.
APORT=$(free_port)
OPORT=$(free_port)
PPORT=$(free_port)
NEWSFLOW_ADMIN_PORT=$APORT NEWSFLOW_ADMIN_OPERATOR_PORT=$OPORT NEWSFLOW_ADMIN_PROBE_PORT=$PPORT \
  NEWSFLOW_ADMIN_LISTEN=127.0.0.1 "$NF" run --set state.dir="$TMP/state" --set sink.spec=none 2>"$TMP/err" &
PID=$!
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$PPORT/readyz" >/dev/null 2>&1 && break
  kill -0 "$PID" 2>/dev/null || fail "the job exited"
  sleep 0.1
done
curl -sf "http://127.0.0.1:$PPORT/healthz" >/dev/null || fail "/healthz on the probe port"
curl -sf "http://127.0.0.1:$PPORT/readyz" >/dev/null || fail "/readyz on the probe port"
curl -sf "http://127.0.0.1:$APORT/v1/trending" >/dev/null || fail "the admin port does not answer readers"
curl -sf "http://127.0.0.1:$OPORT/v1/status" >/dev/null || fail "the operator port does not answer /v1/status"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$APORT/v1/status")" = 404 ] ||
  fail "the readers' port answers the operators' /v1/status"
stop_job
[ "$RC" -eq 0 ] || fail "the job did not stop cleanly (exit $RC)"
pass "the probes' paths answer on the probe port the manifest's environment names; operators' routes only on theirs"

# Seccomp: the profile is the default plus io_uring; the job runs under it, and under the
# default alone it says why it cannot start.
"$CHECK" seccomp "$SRC/deploy/seccomp/newsflow.json" 2>"$TMP/err" || fail "$(cat "$TMP/err")"
"$CHECK" seccomp-default >"$TMP/default-seccomp.json"
set +e
"$SECCOMP_RUN" "$SRC/deploy/seccomp/newsflow.json" "$NF" run --set state.dir="$TMP/s1" \
  --set runtime.stop_after_ms=3000 --set admin.port=0 --set sink.spec=none 2>"$TMP/err1"
rc1=$?
"$SECCOMP_RUN" "$TMP/default-seccomp.json" "$NF" run --set state.dir="$TMP/s2" \
  --set runtime.stop_after_ms=3000 --set admin.port=0 --set sink.spec=none 2>"$TMP/err2"
rc2=$?
set -e
[ $rc1 -eq 0 ] || { tail -5 "$TMP/err1" >&2; fail "the job under deploy/seccomp/newsflow.json exited $rc1"; }
grep -q '"msg":"epoch.committed"' "$TMP/err1" || fail "no epoch committed under the profile"
[ $rc2 -eq 1 ] || fail "under the default profile: exit $rc2, want 1"
grep -q 'io_uring is blocked: a seccomp profile.*deploy/seccomp/newsflow.json' "$TMP/err2" ||
  fail "under the default profile the job does not say why: $(tail -3 "$TMP/err2")"
pass "deploy/seccomp/newsflow.json: the default plus io_uring; the job runs under it, and says why not without"
