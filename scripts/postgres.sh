#!/usr/bin/env bash
# A PostgreSQL 15 on loopback (Debian 12's, /usr/lib/postgresql/15/bin), for the tests, the demo
# and the benchmarks of `newsflow sink postgres` (src/sink/), as scripts/kafka.sh is for Kafka.
# A TEST DATABASE: anyone on this machine may connect to it as its superuser, with no password.
#
#   scripts/postgres.sh start [--dir DIR] [--port PORT] [--fresh]
#                                           initdb if DIR holds no cluster, start the server, wait
#                                           until pg_isready answers, create the database newsflow
#                                           if missing; prints the conninfo (as `dsn`)
#   scripts/postgres.sh stop [--dir DIR] [--immediate]
#                                           stops what `start` started there, by pid: fast
#                                           shutdown (SIGINT), or --immediate (SIGQUIT: no
#                                           checkpoint, crash recovery at the next start); waits
#                                           until it is gone; nothing running: exit 0
#   scripts/postgres.sh restart [--dir DIR] [--immediate]
#                                           stop, then start on the same data and port
#   scripts/postgres.sh status [--dir DIR]  pid, port, conninfo, pg_isready (exit 1 if not running)
#   scripts/postgres.sh dsn [--dir DIR]     prints a libpq conninfo: host=127.0.0.1 port=PORT
#                                           dbname=newsflow user=postgres (nothing if no cluster
#                                           was ever started in DIR; printed while it is stopped)
#   scripts/postgres.sh pid [--dir DIR]     pid of the postmaster (exit 1 if not running)
#   scripts/postgres.sh psql [--dir DIR] [PSQL ARGS...]
#                                           psql on the database newsflow (-X: no ~/.psqlrc;
#                                           ON_ERROR_STOP=1), e.g. psql -c 'select 1'
#
# Cluster: DIR (default ${NF_PG_DIR:-/tmp/newsflow-postgres}) holds data/ (the cluster), port,
# pid, server.log (the server's own log, appended at every start) and initdb.log. PORT defaults
# to 5433, beside a system PostgreSQL's 5432; a cluster keeps the port it was last started on.
# `start` on a DIR that holds a cluster restarts it with its data (--fresh wipes DIR first; it
# refuses to wipe a DIR this script did not make). The server runs in a session of its own
# (setsid): it is no child of the shell or test that started it, so their cleanup cannot kill it
# by accident; stop it with `stop`.
# User: PostgreSQL refuses to run as root. Invoked as root (CI, the container), initdb and the
# server run as the `postgres` system user (Debian's postgresql-common creates it) through
# setpriv, DIR is chowned to it, and every parent of DIR must be searchable by it (/tmp is; a
# DIR under /root is not). Invoked as another user, they run as that user. Either way the
# database superuser is named postgres.
# Settings (DIR/data/newsflow.conf, rewritten at every start; initdb: UTF8, locale C, so
# results do not depend on the machine's locale):
#   listen_addresses = 127.0.0.1            loopback only: nothing beyond this machine
#   unix_socket_directories = DIR           not /var/run/postgresql (root's, and a system
#                                           server's); a DIR whose socket path would pass
#                                           107 bytes gets /tmp/newsflow-pg-<hash of DIR>
#   pg_hba.conf: trust for local and host 127.0.0.1/32 (and replication)
#                                           a test database: no passwords to manage
#   fsync, synchronous_commit, full_page_writes = on
#                                           PostgreSQL's defaults, said out loud: a commit
#                                           survives a crash; the sink's durability is what
#                                           its tests measure, never turn these off here
#   shared_buffers = 256MB                  a test box's share (default 128MB); benchmarks'
#                                           tables stay in memory
#   max_connections = 100                   the default: tests run a few sinks at a time
#   log_min_messages = warning              the log keeps warnings, errors, start and stop
#                                           (LOG lines), not routine notices
# Needs: postgresql-15 (scripts/deps.sh installs it); util-linux's setpriv and setsid.
# Exit: 0 ok, 1 failure (the message says which log to read), 2 usage.
set -euo pipefail

PGBIN="${NF_PG_BIN:-/usr/lib/postgresql/15/bin}"
DIR="${NF_PG_DIR:-/tmp/newsflow-postgres}"
DEFAULT_PORT=5433
PORT=""
FRESH=0
IMMEDIATE=0
START_TIMEOUT=180 # s: crash recovery after `stop --immediate` mid-load replays the WAL
MARK=.newsflow-postgres

die() {
  echo "postgres.sh: $*" >&2
  exit 1
}
bad_usage() {
  echo "postgres.sh: $*" >&2
  exit 2
}
usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

alive() { # alive PID: the process exists and is not a zombie
  local st
  st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "${st%% *}" != Z ]
}

is_postmaster() { # is_postmaster PID: it is the server of $DIR
  [ -r "/proc/$1/cmdline" ] &&
    tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "postgres -D $DIR/data " && alive "$1"
}

server_pid() { # the postmaster's pid, or nothing: DIR/pid, else the cluster's postmaster.pid
  local pid f
  for f in "$DIR/pid" "$DIR/data/postmaster.pid"; do
    pid=$(head -1 "$f" 2>/dev/null || true)
    case "$pid" in '' | *[!0-9]*) continue ;; esac
    if is_postmaster "$pid"; then
      echo "$pid"
      return 0
    fi
  done
}

cluster_port() { # the port the cluster in $DIR was last started on, or nothing
  [ -f "$DIR/port" ] && cat "$DIR/port"
  return 0
}

dsn() {
  local p
  p=$(cluster_port)
  [ -z "$p" ] || echo "host=127.0.0.1 port=$p dbname=newsflow user=postgres"
}

sql() { # sql DB QUERY: one query as the superuser over TCP, unaligned tuples only
  "$PGBIN/psql" -X -q -t -A -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres -d "$1" \
    -c "$2"
}

AS=() # the prefix that runs a command as the server's user
run_as_setup() {
  if [ "$(id -u)" -ne 0 ]; then
    return 0
  fi
  getent passwd postgres >/dev/null ||
    die "no postgres system user (the postgresql-common package creates it; scripts/deps.sh installs it)"
  AS=(setpriv --reuid=postgres --regid=postgres --init-groups --reset-env)
}

socket_dir() { # DIR, unless the socket's path would be too long for sun_path
  local s="$DIR/.s.PGSQL.$PORT"
  if [ ${#s} -le 107 ]; then
    echo "$DIR"
  else
    echo "/tmp/newsflow-pg-$(printf '%s' "$DIR" | sha256sum | cut -c1-12)"
  fi
}

port_taken() { # something accepts connections on 127.0.0.1:$PORT
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null
}

lock() {
  exec 9>"$DIR/.lock"
  flock 9
}

init_cluster() {
  rm -rf "$DIR/data" # an initdb that was interrupted, if any: DIR/port is written last
  if ! "${AS[@]}" "$PGBIN/initdb" -D "$DIR/data" -U postgres --auth=trust --encoding=UTF8 \
    --locale=C --no-instructions >"$DIR/initdb.log" 2>&1; then
    tail -20 "$DIR/initdb.log" >&2
    die "initdb failed; see $DIR/initdb.log"
  fi
  cat >"$DIR/data/pg_hba.conf" <<'EOF'
# written by scripts/postgres.sh: a test database on loopback, no passwords
# TYPE  DATABASE     USER  ADDRESS       METHOD
local   all          all                 trust
host    all          all   127.0.0.1/32  trust
local   replication  all                 trust
host    replication  all   127.0.0.1/32  trust
EOF
  printf "\n# scripts/postgres.sh's settings, rewritten at every start\ninclude 'newsflow.conf'\n" \
    >>"$DIR/data/postgresql.conf"
}

write_config() { # write_config SOCKDIR
  cat >"$DIR/data/newsflow.conf" <<EOF
# written by scripts/postgres.sh at every start: its header says why each
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$1'
max_connections = 100
shared_buffers = 256MB
fsync = on
synchronous_commit = on
full_page_writes = on
log_destination = 'stderr'
logging_collector = off
log_min_messages = warning
log_line_prefix = '%m [%p] '
EOF
  if [ ${#AS[@]} -gt 0 ]; then chown postgres:postgres "$DIR/data/newsflow.conf"; fi
}

log_since() { # log_since OFFSET: what the server logged since then (the last 20 lines)
  tail -c +"$(($1 + 1))" "$DIR/server.log" 2>/dev/null | tail -20 >&2 || true
}

cmd_start() {
  if [ "$FRESH" = 1 ] && [ -d "$DIR" ] && [ -n "$(ls -A "$DIR")" ] && [ ! -e "$DIR/$MARK" ]; then
    die "refusing to wipe $DIR (--fresh): it is not empty and scripts/postgres.sh did not make it"
  fi
  mkdir -p "$DIR"
  touch "$DIR/$MARK"
  lock
  if [ "$FRESH" = 1 ]; then
    cmd_stop
    find "$DIR" -mindepth 1 -maxdepth 1 ! -name .lock ! -name "$MARK" -exec rm -rf {} +
  fi
  [ -x "$PGBIN/postgres" ] || die "no $PGBIN/postgres (postgresql-15; scripts/deps.sh installs it)"
  local pid
  pid=$(server_pid)
  if [ -n "$pid" ]; then
    PORT=$(cluster_port)
    echo "postgres.sh: already running in $DIR (pid $pid, port $PORT)" >&2
    dsn
    return 0
  fi
  [ -n "$PORT" ] || PORT=$(cluster_port)
  [ -n "$PORT" ] || PORT=$DEFAULT_PORT
  run_as_setup
  local sock
  sock=$(socket_dir)
  mkdir -p "$sock"
  if [ ${#AS[@]} -gt 0 ]; then
    chown postgres:postgres "$DIR" "$sock"
    "${AS[@]}" test -w "$DIR" -a -x "$DIR" ||
      die "the postgres user cannot reach $DIR: a parent directory is not searchable by it (chmod o+x it, or use a --dir under /tmp)"
  fi
  chmod 0755 "$DIR" # others may read the port, pid and log; data/ is 0700
  if port_taken; then
    local who=""
    if command -v ss >/dev/null; then
      who=$(ss -Hltnp "sport = :$PORT" 2>/dev/null | grep -o 'users:(.*)' | head -1 || true)
    fi
    die "port $PORT on 127.0.0.1 is taken${who:+ ($who)}: stop what holds it or pick --port"
  fi
  if [ ! -f "$DIR/port" ]; then # written once initdb has succeeded
    init_cluster
  fi
  write_config "$sock"
  echo "$PORT" >"$DIR/port"
  local logsize=0 launcher i
  touch "$DIR/server.log"
  logsize=$(stat -c %s "$DIR/server.log")
  (
    cd "$DIR"
    exec setsid "${AS[@]}" "$PGBIN/postgres" -D "$DIR/data" >>"$DIR/server.log" 2>&1 \
      </dev/null 9>&-
  ) &
  launcher=$!
  echo "$launcher" >"$DIR/pid"
  for ((i = 0; i < START_TIMEOUT * 10; i++)); do
    pid=$(server_pid)
    if [ -z "$pid" ] && ! alive "$launcher"; then
      log_since "$logsize"
      die "the server exited during start-up; see $DIR/server.log"
    fi
    if "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -t 2; then
      break
    fi
    sleep 0.1
  done
  if [ "$i" -ge $((START_TIMEOUT * 10)) ]; then
    log_since "$logsize"
    die "the server in $DIR did not accept connections within $START_TIMEOUT s; see $DIR/server.log"
  fi
  # What answers must be this cluster, not a server that took the port meanwhile.
  local datadir
  datadir=$(sql postgres 'show data_directory' 2>/dev/null || true)
  pid=$(server_pid)
  if [ "$datadir" != "$DIR/data" ] || [ -z "$pid" ]; then
    log_since "$logsize"
    die "127.0.0.1:$PORT answers with data directory '${datadir:-?}', not $DIR/data; see $DIR/server.log"
  fi
  echo "$pid" >"$DIR/pid"
  if [ "$(sql postgres "select 1 from pg_database where datname = 'newsflow'")" != 1 ]; then
    sql postgres 'create database newsflow' >/dev/null ||
      die "could not create the database newsflow; see $DIR/server.log"
  fi
  echo "postgres.sh: PostgreSQL $(cat "$DIR/data/PG_VERSION") ready on 127.0.0.1:$PORT (pid $pid, dir $DIR)" >&2
  dsn
}

cmd_stop() {
  local pid sig=INT i
  pid=$(server_pid)
  if [ -z "$pid" ]; then
    rm -f "$DIR/pid"
    return 0
  fi
  [ "$IMMEDIATE" = 0 ] || sig=QUIT
  kill -CONT "$pid" 2>/dev/null || true # a SIGSTOPped server cannot act on the signal
  kill -"$sig" "$pid" || die "cannot signal the server (pid $pid) in $DIR: run as its user or root"
  for ((i = 0; i < 600; i++)); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    echo "postgres.sh: the server (pid $pid) did not stop within 60 s of SIG$sig; immediate shutdown" >&2
    kill -QUIT "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      alive "$pid" || break
      sleep 0.1
    done
    if alive "$pid"; then
      echo "postgres.sh: killing the server (pid $pid)" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$DIR/pid"
}

cmd_status() {
  local pid
  if [ ! -f "$DIR/port" ]; then
    echo "no cluster in $DIR"
    return 1
  fi
  PORT=$(cluster_port)
  pid=$(server_pid)
  echo "PostgreSQL cluster in $DIR: port $PORT, log $DIR/server.log"
  echo "  dsn: $(dsn)"
  if [ -z "$pid" ]; then
    echo "  server: stopped"
    return 1
  fi
  echo "  server: running (pid $pid)"
  echo "  pg_isready: $("$PGBIN/pg_isready" -h 127.0.0.1 -p "$PORT" -U postgres -d newsflow -t 2 2>&1)"
}

[ $# -ge 1 ] || usage
CMD="$1"
shift
case "$CMD" in
  start | stop | restart | status | dsn | pid | psql) ;;
  -h | --help | help) usage ;;
  *)
    echo "postgres.sh: unknown command $CMD" >&2
    usage
    ;;
esac
PSQL_ARGS=()
while [ $# -gt 0 ]; do
  case "$CMD:$1" in
    *:--dir)
      DIR="${2:?--dir needs a directory}"
      shift 2
      ;;
    start:--port)
      PORT="${2:?--port needs a number}"
      case "$PORT" in '' | *[!0-9]*) bad_usage "--port takes a number" ;; esac
      if [ "$PORT" -lt 1 ] || [ "$PORT" -gt 65535 ]; then bad_usage "--port takes 1-65535"; fi
      shift 2
      ;;
    start:--fresh)
      FRESH=1
      shift
      ;;
    stop:--immediate | restart:--immediate)
      IMMEDIATE=1
      shift
      ;;
    psql:*)
      PSQL_ARGS=("$@")
      break
      ;;
    *:-h | *:--help) usage ;;
    *)
      echo "postgres.sh: $CMD takes no option $1" >&2
      usage
      ;;
  esac
done
DIR=$(realpath -m "$DIR")

case "$CMD" in
  start) cmd_start ;;
  stop)
    if [ -d "$DIR" ]; then
      lock
      cmd_stop
    fi
    ;;
  restart)
    [ -f "$DIR/port" ] || die "no cluster in $DIR to restart"
    lock
    cmd_stop
    cmd_start
    ;;
  status) cmd_status ;;
  dsn) dsn ;;
  pid)
    p=$(server_pid)
    [ -n "$p" ] || die "no server running in $DIR"
    echo "$p"
    ;;
  psql)
    PORT=$(cluster_port)
    [ -n "$PORT" ] || die "no cluster in $DIR (scripts/postgres.sh start)"
    exec "$PGBIN/psql" -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres -d newsflow \
      "${PSQL_ARGS[@]}"
    ;;
esac
