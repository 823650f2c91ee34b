#!/usr/bin/env bash
# Demo: migrate a 200,000-row table while 4 writers keep changing it, then
# prove that no write was lost (the load's in-memory copy matches the table
# row by row) and that the replica holds the same table as the primary.
#
# Runs on a fresh Debian 12 as root: installs MariaDB if needed, builds
# recast, starts a local sandbox (primary on 127.0.0.1:13306, replica on
# 13307) and always stops it again.
#
# Environment: ROWS (200000), WRITERS (4), RATE (300 ops/s), PORT (13306),
# SETTLE (5: seconds of load before and after the migration), ALTER,
# FLAVOR (mariadb-10.11, the installed MariaDB; or mariadb-11.8, mysql-9.7,
# fetched by scripts/fetch-flavor.sh into the flavor cache).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)

ROWS=${ROWS:-200000}
WRITERS=${WRITERS:-4}
RATE=${RATE:-300}
PORT=${PORT:-13306}
RPORT=$((PORT + 1))
SETTLE=${SETTLE:-5}
FLAVOR=${FLAVOR:-mariadb-10.11}
ALTER=${ALTER:-"ADD COLUMN note VARCHAR(64) NULL, MODIFY i BIGINT NULL, ADD INDEX idx_dtm (dtm)"}
SB_DIR=.sandbox/demo
LOG_DIR=.sandbox/demo-logs
DB=demo
TABLE=orders
USER_=recast
PASS=recast

# Colours only on a terminal (no escape codes in a log file).
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then B=$'\033[1m' R=$'\033[31m' G=$'\033[32m' N=$'\033[0m'; else B= R= G= N=; fi
say() { printf '\n%s==> %s%s\n' "$B" "$*" "$N"; }
die() { printf '%sdemo: %s%s\n' "$R" "$*" "$N" >&2; exit 1; }

# --- prerequisites -----------------------------------------------------------
if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
	say "installing MariaDB (mariadb-server, mariadb-client)"
	[ "$(id -u)" -eq 0 ] || die "mariadbd is missing; run as root or install mariadb-server and mariadb-client"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q mariadb-server mariadb-client
fi
export PATH="$PATH:/usr/sbin:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || die "go is not installed (expected in /usr/local/go/bin)"
MYSQL=$(command -v mariadb || command -v mysql) || die "no mariadb client"
if [ "$FLAVOR" != mariadb-10.11 ]; then
	say "fetching $FLAVOR (scripts/fetch-flavor.sh)"
	FLAVOR_DIR=$(bash scripts/fetch-flavor.sh "$FLAVOR") || die "could not fetch $FLAVOR"
	MYSQL=$FLAVOR_DIR/bin/mysql # the flavor's own client
fi
case "$FLAVOR" in
mysql-*) GTID_POS="SELECT @@GLOBAL.gtid_executed" GTID_WAIT=WAIT_FOR_EXECUTED_GTID_SET ;;
*) GTID_POS="SELECT @@GLOBAL.gtid_binlog_pos" GTID_WAIT=MASTER_GTID_WAIT ;;
esac

sql() { # sql PORT ARGS...: run the client against the sandbox instance on PORT
	local port=$1
	shift
	"$MYSQL" --protocol=TCP -h127.0.0.1 -P"$port" -u"$USER_" -p"$PASS" "$@"
}

say "building bin/recast and bin/recastload"
mkdir -p bin
go build -o bin/recast ./cmd/recast
go build -o bin/recastload ./cmd/recastload

# --- sandbox -------------------------------------------------------------------
LOAD_PID=""
TAIL_PID=""
SANDBOX_UP=0
cleanup() {
	local rc=$?
	set +e
	if [ -n "$LOAD_PID" ] && kill -0 "$LOAD_PID" 2>/dev/null; then
		kill -TERM "$LOAD_PID" 2>/dev/null
		wait "$LOAD_PID" 2>/dev/null
	fi
	if [ -n "$TAIL_PID" ]; then
		wait "$TAIL_PID" 2>/dev/null # tail --pid ends with recastload
	fi
	if [ "$SANDBOX_UP" = 1 ]; then
		say "stopping the sandbox"
		bin/recast sandbox down --dir "$SB_DIR" || rc=1
	fi
	if [ "$rc" -ne 0 ]; then
		printf '%sdemo FAILED (exit %d); logs in %s%s\n' "$R" "$rc" "$ROOT/$LOG_DIR" "$N" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -e "$SB_DIR/sandbox.json" ]; then
	say "stopping the sandbox left in $SB_DIR"
	bin/recast sandbox down --dir "$SB_DIR"
fi
rm -rf "$LOG_DIR"
mkdir -p "$LOG_DIR"

say "starting a $FLAVOR sandbox: primary 127.0.0.1:$PORT, replica 127.0.0.1:$RPORT"
SANDBOX_UP=1
bin/recast sandbox up --flavor "$FLAVOR" --dir "$SB_DIR" --port "$PORT" --replicas 1

sql "$PORT" -e "CREATE DATABASE $DB"

# --- load ----------------------------------------------------------------------
say "preparing $ROWS rows in $DB.$TABLE, then $WRITERS writers at $RATE ops/s"
LOAD_LOG=$LOG_DIR/recastload.log
bin/recastload --host 127.0.0.1 --port "$PORT" --user "$USER_" --password "$PASS" \
	--database "$DB" --table "$TABLE" \
	run --rows "$ROWS" --writers "$WRITERS" --rate "$RATE" --verify >"$LOAD_LOG" 2>&1 &
LOAD_PID=$!
# Show the load's output as it comes; tail ends when recastload does.
tail -n +1 -f --pid="$LOAD_PID" "$LOAD_LOG" 2>/dev/null | sed -u 's/^/    [load] /' &
TAIL_PID=$!

for _ in $(seq 1 600); do
	grep -q '^running:' "$LOAD_LOG" && break
	kill -0 "$LOAD_PID" 2>/dev/null || die "recastload exited before the load started (see $LOAD_LOG)"
	sleep 0.5
done
grep -q '^running:' "$LOAD_LOG" || die "recastload did not finish preparing within 5 minutes"
sleep "$SETTLE"

# --- migration -----------------------------------------------------------------
say "recast migrate --alter \"$ALTER\""
MIG_LOG=$LOG_DIR/migrate.log
MIG_START=$(date +%s.%N)
set +e
bin/recast migrate --host 127.0.0.1 --port "$PORT" --user "$USER_" --password "$PASS" \
	--database "$DB" --table "$TABLE" --alter "$ALTER" --execute | tee "$MIG_LOG"
MIG_RC=${PIPESTATUS[0]}
set -e
MIG_END=$(date +%s.%N)
MIG_SECS=$(awk -v a="$MIG_START" -v b="$MIG_END" 'BEGIN { printf "%.1f", b - a }')

# Keep writing to the new table for a while, then stop the load and let it
# verify the table.
[ "$MIG_RC" -eq 0 ] && sleep "$SETTLE"
say "stopping the load (SIGINT) and verifying the table"
kill -INT "$LOAD_PID" 2>/dev/null || true
LOAD_RC=0
wait "$LOAD_PID" || LOAD_RC=$?
LOAD_PID=""
wait "$TAIL_PID" 2>/dev/null || true
TAIL_PID=""

# --- replica -------------------------------------------------------------------
say "comparing the replica (port $RPORT) with the primary (port $PORT)"
REPL_OK=0
REPL_MSG=""
GTID=$(sql "$PORT" -N -B -e "$GTID_POS" | tr -d '\n')
WAITED=$(sql "$RPORT" -N -B -e "SELECT $GTID_WAIT('$GTID', 120)" || echo error)
if [ "$WAITED" != 0 ]; then
	REPL_MSG="replica did not catch up with $GTID ($GTID_WAIT: $WAITED)"
else
	P_SUM=$(sql "$PORT" -N -B -e "CHECKSUM TABLE $DB.$TABLE EXTENDED" | awk '{print $2}')
	R_SUM=$(sql "$RPORT" -N -B -e "CHECKSUM TABLE $DB.$TABLE EXTENDED" | awk '{print $2}')
	P_CNT=$(sql "$PORT" -N -B -e "SELECT COUNT(*) FROM $DB.$TABLE")
	R_CNT=$(sql "$RPORT" -N -B -e "SELECT COUNT(*) FROM $DB.$TABLE")
	P_DDL=$(sql "$PORT" -N -B -e "SHOW CREATE TABLE $DB.$TABLE" | md5sum)
	R_DDL=$(sql "$RPORT" -N -B -e "SHOW CREATE TABLE $DB.$TABLE" | md5sum)
	echo "primary: $P_CNT rows, checksum $P_SUM"
	echo "replica: $R_CNT rows, checksum $R_SUM"
	if [ -n "$P_SUM" ] && [ "$P_SUM" = "$R_SUM" ] && [ "$P_CNT" = "$R_CNT" ] && [ "$P_DDL" = "$R_DDL" ]; then
		REPL_OK=1
		REPL_MSG="identical ($P_CNT rows, CHECKSUM TABLE $P_SUM, same definition)"
	else
		REPL_MSG="DIFFERENT (primary: $P_CNT rows, checksum $P_SUM; replica: $R_CNT rows, checksum $R_SUM; definitions $([ "$P_DDL" = "$R_DDL" ] && echo same || echo differ))"
	fi
fi

# --- summary -------------------------------------------------------------------
LOAD_SUMMARY=$(grep '^summary:' "$LOAD_LOG" | tail -1 | sed 's/^summary: //')
VERIFY_LINE=$(grep '^verify:' "$LOAD_LOG" | tail -1 | sed 's/^verify: //')
RESULT_LINE=$(grep '^RESULT:' "$LOAD_LOG" | tail -1)
say "summary"
if [ "$MIG_RC" -eq 0 ]; then
	echo "migration:     OK in ${MIG_SECS}s ($(tail -1 "$MIG_LOG"))"
else
	echo "migration:     FAILED (exit $MIG_RC) after ${MIG_SECS}s"
fi
echo "load:          ${LOAD_SUMMARY:-no summary (see $LOAD_LOG)}"
echo "verification:  ${VERIFY_LINE:-none} -> ${RESULT_LINE:-no result (exit $LOAD_RC)}"
echo "replica:       $REPL_MSG"
echo "logs:          $ROOT/$LOG_DIR"

FAILED=0
[ "$MIG_RC" -eq 0 ] || FAILED=1
[ "$LOAD_RC" -eq 0 ] || FAILED=1
[ "$REPL_OK" -eq 1 ] || FAILED=1
if [ "$FAILED" -ne 0 ]; then
	exit 1
fi
printf '\n%sdemo OK%s\n' "$G" "$N"
