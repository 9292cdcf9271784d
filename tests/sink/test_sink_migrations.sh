#!/usr/bin/env bash
# `newsflow sink postgres --migrate` and the schema check at start (src/sink/pg_db.c,
# src/cli/cli_sink.c), on the postgres fixture's server (NF_TEST_PG=<conninfo>) and the kafka
# fixture's broker (NF_TEST_BROKER=kafka:HOST:PORT), in databases and under a topic prefix of
# the test's own (dropped at the end):
#   a fresh database: the sink refuses it (exit 1, naming --migrate); --migrate creates
#     the latest version ("schema migrated", every migration's row); a second --migrate says
#     "schema up to date" and changes nothing; the sink then starts and /readyz answers 200 once
#     Kafka assigned it; SIGTERM: 0;
#   a database of version 1 (the released 0001 applied as an older binary did, a trending item
#     landed): the sink refuses it naming --migrate; --migrate brings it from 1 to the latest,
#     the item kept with NULL in the columns version 2 added;
#   a database from the future (version 99 in newsflow_schema): the sink refuses it (exit 1,
#     "newer than this binary's") and so does --migrate (exit 1), which changes nothing;
#   two --migrate at once on a fresh database (both held on the migration's advisory lock,
#     then let go together): both exit 0, one migrates, the other finds it up to date, and
#     every version is recorded once.
# $1 = newsflow binary, $2 = source dir. NF_KEEP_TMP=1 keeps the logs and the databases.
source "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh" "$@"

[ -n "${NF_TEST_PG:-}" ] || fail "NF_TEST_PG is not set (ctest's postgres fixture sets it)"
case "${NF_TEST_BROKER:-}" in
  kafka:*) BROKER="${NF_TEST_BROKER#kafka:}" ;;
  *) fail "needs Apache Kafka: NF_TEST_BROKER=kafka:HOST:PORT (ctest's kafka fixture sets it)" ;;
esac
command -v psql >/dev/null || fail "psql is not installed (scripts/deps.sh installs PostgreSQL 15)"

TAG="nft_sink_mig_$$_$(od -An -N2 -tx2 /dev/urandom | tr -d ' ')"
PREFIX="nft-sink-migrations-$$-${TAG##*_}."
DBS=()
LOCKER=""
cleanup() {
  stop_pids "$PID" "$LOCKER"
  if [ -n "${NF_KEEP_TMP:-}" ]; then
    echo "keeping $TMP and databases ${DBS[*]}"
  else
    for db in "${DBS[@]}"; do
      psql -X -q -d "$NF_TEST_PG" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
    done
    rm -rf "$TMP"
  fi
}
fail() {
  echo "FAIL: $*" >&2
  for f in "$TMP"/*.err; do
    [ -s "$f" ] && { echo "---- $f" >&2; tail -5 "$f" >&2; }
  done
  exit 1
}

q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
dsn_of() {
  case "$NF_TEST_PG" in
    *dbname=*) echo "$NF_TEST_PG" | sed -E "s/dbname=[^ ]+/dbname=$1/" ;;
    *) echo "$NF_TEST_PG dbname=$1" ;;
  esac
}
new_db() {
  q "$NF_TEST_PG" "CREATE DATABASE $1" || fail "CREATE DATABASE $1 on $NF_TEST_PG"
  DBS+=("$1")
}
# What a migration could change: the tables, views and functions of the schema public, their
# columns, and newsflow_schema's rows.
snapshot() {
  q "$1" "SELECT string_agg(format('%s.%s %s', c.relname, a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY c.relname, a.attnum) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped WHERE n.nspname = 'public'"
  q "$1" "SELECT string_agg(p.proname, ',' ORDER BY p.proname) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'"
  q "$1" "SELECT string_agg(format('%s|%s|%s', version, description, applied_at), ';' ORDER BY version) FROM newsflow_schema" 2>/dev/null || echo "no newsflow_schema"
}
SETS=(--set "kafka.brokers=$BROKER" --set "kafka.topic_prefix=$PREFIX"
      --set "postgres.group_id=${PREFIX}sink" --set admin.port=0)
sink() { # sink DSN LOG [ARGS...]: runs to its exit (60 s at most), exit code in RC
  local dsn="$1" log="$2"
  shift 2
  set +e
  timeout 60 "$NF" sink postgres "${SETS[@]}" --set "postgres.dsn=$dsn" "$@" >"$log" 2>&1
  RC=$?
  set -e
}

LATEST=$(ls "$SRC"/src/sink/migrations/[0-9][0-9][0-9][0-9]_*.sql | wc -l)
VERSIONS=$(seq -s, 1 "$LATEST")
"$NF" topics create --set "kafka.brokers=$BROKER" --set "kafka.topic_prefix=$PREFIX" \
  >"$TMP/topics.out" 2>"$TMP/topics.err" || fail "newsflow topics create (prefix $PREFIX)"

# ---- a fresh database
new_db "${TAG}_fresh"
FRESH=$(dsn_of "${TAG}_fresh")
sink "$FRESH" "$TMP/refused.err"
[ "$RC" = 1 ] || fail "the sink on a database without the schema exited $RC, want 1"
grep -q -- '--migrate' "$TMP/refused.err" || fail "the sink's refusal does not name --migrate: $(tail -2 "$TMP/refused.err")"
[ "$(q "$FRESH" "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'")" = 0 ] ||
  fail "the refused sink created something in the database"
pass "a fresh database: the sink refuses it (exit 1), naming --migrate"

sink "$FRESH" "$TMP/migrate1.err" --migrate
[ "$RC" = 0 ] || fail "--migrate on a fresh database exited $RC"
grep '"msg":"schema migrated"' "$TMP/migrate1.err" | grep -q '"from_version":0,"to_version":'"$LATEST" ||
  fail "--migrate did not log \"schema migrated\" from 0 to $LATEST: $(tail -2 "$TMP/migrate1.err")"
[ "$(q "$FRESH" "SELECT string_agg(version::text, ',' ORDER BY version) FROM newsflow_schema")" = "$VERSIONS" ] ||
  fail "newsflow_schema after --migrate: $(q "$FRESH" "SELECT * FROM newsflow_schema")"
for t in newsflow_sink_offsets article article_topic story_cluster story_member user_interest \
  user_interest_version trending_snapshot trending_item read_event story; do
  [ "$(q "$FRESH" "SELECT to_regclass('$t') IS NOT NULL")" = t ] || fail "--migrate did not create $t"
done
pass "--migrate creates version $LATEST (\"schema migrated\") with the seed's tables"

snapshot "$FRESH" >"$TMP/snap1"
sink "$FRESH" "$TMP/migrate2.err" --migrate
[ "$RC" = 0 ] || fail "a second --migrate exited $RC"
grep -q '"msg":"schema up to date"' "$TMP/migrate2.err" ||
  fail "a second --migrate did not say \"schema up to date\": $(tail -2 "$TMP/migrate2.err")"
snapshot "$FRESH" >"$TMP/snap2"
cmp -s "$TMP/snap1" "$TMP/snap2" || fail "a second --migrate changed the database: $(diff "$TMP/snap1" "$TMP/snap2" | head -5)"
pass "a second --migrate says \"schema up to date\" and changes nothing"

"$NF" sink postgres "${SETS[@]}" --set "postgres.dsn=$FRESH" >"$TMP/sink.err" 2>&1 &
PID=$!
PORT=""
for _ in $(seq 600); do
  kill -0 "$PID" 2>/dev/null || fail "the sink exited on a migrated database"
  PORT=$(sed -n 's/.*"msg":"landing the job'"'"'s outputs in PostgreSQL".*"port":\([0-9]*\).*/\1/p' "$TMP/sink.err" | head -1)
  [ -n "$PORT" ] && break
  sleep 0.1
done
[ -n "$PORT" ] || fail "the sink did not log its admin port"
code=""
for _ in $(seq 900); do
  kill -0 "$PID" 2>/dev/null || fail "the sink exited while waiting for /readyz"
  code=$(curl -s -o "$TMP/readyz" -w '%{http_code}' "http://127.0.0.1:$PORT/readyz" || true)
  [ "$code" = 200 ] && break
  sleep 0.1
done
[ "$code" = 200 ] || fail "/readyz answered $code ($(cat "$TMP/readyz" 2>/dev/null)) after 90 s, want 200"
grep -q '"ready":true' "$TMP/readyz" || fail "/readyz 200 with body $(cat "$TMP/readyz")"
stop_job
[ "$RC" = 0 ] || fail "the sink exited $RC after SIGTERM, want 0"
pass "the sink starts on the migrated database: /readyz 200 once assigned, exit 0 on SIGTERM"

# ---- a database an older binary made: version 1, with a trending item landed
new_db "${TAG}_v1"
V1=$(dsn_of "${TAG}_v1")
q "$V1" "CREATE TABLE newsflow_schema (version integer PRIMARY KEY, description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d "$V1" -f "$SRC/src/sink/migrations/0001_seed_model.sql" >/dev/null ||
  fail "applying 0001_seed_model.sql by hand"
q "$V1" "INSERT INTO newsflow_schema VALUES (1, 'the seed''s data model', now()); INSERT INTO trending_snapshot VALUES ('2026-11-30T10:00:00Z', '2026-11-30T09:00:00Z'); INSERT INTO trending_item VALUES ('2026-11-30T10:00:00Z', 1, 'a1', 7)" >/dev/null
sink "$V1" "$TMP/v1-refused.err"
[ "$RC" = 1 ] || fail "the sink on a database of version 1 exited $RC, want 1"
grep -q -- 'schema version 1, older than this binary.s '"$LATEST"'.*--migrate' "$TMP/v1-refused.err" ||
  fail "the refusal of version 1 does not name the versions and --migrate: $(tail -2 "$TMP/v1-refused.err")"
sink "$V1" "$TMP/v1-migrate.err" --migrate
[ "$RC" = 0 ] || fail "--migrate on a database of version 1 exited $RC"
grep '"msg":"schema migrated"' "$TMP/v1-migrate.err" | grep -q '"from_version":1,"to_version":'"$LATEST" ||
  fail "--migrate did not log \"schema migrated\" from 1 to $LATEST: $(tail -2 "$TMP/v1-migrate.err")"
[ "$(q "$V1" "SELECT string_agg(version::text, ',' ORDER BY version) FROM newsflow_schema")" = "$VERSIONS" ] ||
  fail "newsflow_schema after --migrate from 1: $(q "$V1" "SELECT * FROM newsflow_schema")"
[ "$(q "$V1" "SELECT article_id || ' ' || score || ' ' || (cluster_id IS NULL) || ' ' || (articles IS NULL) FROM trending_item")" = "a1 7 true true" ] ||
  fail "the item landed at version 1 after --migrate: $(q "$V1" "SELECT * FROM trending_item")"
pass "a database of version 1: refused naming --migrate; --migrate brings it to $LATEST, its rows kept"

# ---- a database from the future
new_db "${TAG}_future"
FUTURE=$(dsn_of "${TAG}_future")
sink "$FUTURE" "$TMP/future-migrate0.err" --migrate
[ "$RC" = 0 ] || fail "--migrate on the second database exited $RC"
q "$FUTURE" "INSERT INTO newsflow_schema VALUES (99, 'future', now())" >/dev/null
snapshot "$FUTURE" >"$TMP/snap-future1"
sink "$FUTURE" "$TMP/future-sink.err"
[ "$RC" = 1 ] || fail "the sink on a database of version 99 exited $RC, want 1"
grep -q "newer than this binary's" "$TMP/future-sink.err" ||
  fail "the sink's refusal of version 99 does not say \"newer than this binary's\": $(tail -2 "$TMP/future-sink.err")"
sink "$FUTURE" "$TMP/future-migrate.err" --migrate
[ "$RC" = 1 ] || fail "--migrate on a database of version 99 exited $RC, want 1"
grep -q "newer than this binary's" "$TMP/future-migrate.err" ||
  fail "--migrate's refusal of version 99 does not say \"newer than this binary's\": $(tail -2 "$TMP/future-migrate.err")"
snapshot "$FUTURE" >"$TMP/snap-future2"
cmp -s "$TMP/snap-future1" "$TMP/snap-future2" ||
  fail "--migrate on version 99 changed the database: $(diff "$TMP/snap-future1" "$TMP/snap-future2" | head -5)"
pass "a database of version 99: the sink and --migrate refuse it (exit 1, \"newer than this binary's\"), nothing changed"

# ---- two --migrate at once: both wait on the migration's advisory lock, held here, then go
new_db "${TAG}_race"
RACE=$(dsn_of "${TAG}_race")
APP="nft-lock-$$"
PGAPPNAME="$APP" psql -X -q -d "$RACE" -c "SELECT pg_advisory_lock(7336451289), pg_sleep(300)" \
  >/dev/null 2>&1 &
LOCKER=$!
held=""
for _ in $(seq 300); do
  held=$(q "$RACE" "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = '$APP'")
  [ "$held" = 1 ] && break
  sleep 0.1
done
[ "$held" = 1 ] || fail "could not hold the migration's advisory lock (pg_advisory_lock(7336451289))"
( sink "$RACE" "$TMP/race1.err" --migrate; echo "$RC" >"$TMP/race1.rc" ) &
R1=$!
( sink "$RACE" "$TMP/race2.err" --migrate; echo "$RC" >"$TMP/race2.rc" ) &
R2=$!
waiting=""
for _ in $(seq 300); do
  waiting=$(q "$RACE" "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
  [ "$waiting" = 2 ] && break
  sleep 0.1
done
[ "$waiting" = 2 ] || fail "the two --migrate did not both wait on the advisory lock ($waiting waiting)"
q "$RACE" "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '$APP'" >/dev/null
wait "$LOCKER" 2>/dev/null || true
LOCKER=""
wait "$R1" "$R2" || true
[ "$(cat "$TMP/race1.rc")" = 0 ] && [ "$(cat "$TMP/race2.rc")" = 0 ] ||
  fail "two --migrate at once exited $(cat "$TMP/race1.rc") and $(cat "$TMP/race2.rc"), want 0 and 0"
migrated=$(cat "$TMP/race1.err" "$TMP/race2.err" | grep -c '"msg":"schema migrated"' || true)
uptodate=$(cat "$TMP/race1.err" "$TMP/race2.err" | grep -c '"msg":"schema up to date"' || true)
[ "$migrated" = 1 ] && [ "$uptodate" = 1 ] ||
  fail "two --migrate at once: $migrated said \"schema migrated\", $uptodate \"schema up to date\" (want 1 and 1)"
[ "$(q "$RACE" "SELECT count(*) || ' ' || max(version) FROM newsflow_schema")" = "$LATEST $LATEST" ] ||
  fail "newsflow_schema after two --migrate at once: $(q "$RACE" "SELECT * FROM newsflow_schema")"
pass "two --migrate at once (held on the advisory lock, then let go): both exit 0, each version recorded once"
echo "test_sink_migrations: passed"
