#!/usr/bin/env bash
# bench/run.sh: rebuild a sysbench table with native ALTER (INPLACE, COPY),
# pt-online-schema-change and recast, side by side in one run, idle and under
# sysbench oltp_write_only load at fixed rates (light ≈ 10 %, heavy ≈ 40 % of
# the measured maximum), and write the results to bench/RESULTS.md.
#
#   bench/run.sh [--rows N] [--only idle|light|heavy[,...]] [--tools LIST]
#                [--idle-repeat N] [--max-tps N] [--resume DIR] [--keep-sandbox]
#                [--recast-src auto|worktree|REV] [--recast-bin PATH]
#                [--recast-variant NAME='FLAGS' ...]
#                [--flavor mariadb-10.11|mariadb-11.8|mysql-9.7]
#
# Everything runs on a sandbox (primary 127.0.0.1:14306, replica :14307,
# .sandbox/bench; BENCH_PORT moves both; --flavor picks the server, default
# mariadb-10.11) that is started here and removed at the end. A complete run
# on another flavor writes bench/RESULTS-<flavor>.md. On mysql-9.7 the
# replica is read with SHOW REPLICA STATUS and waited for with
# WAIT_FOR_EXECUTED_GTID_SET, it applies serially (replica_parallel_workers=1
# unless BENCH_REPLICA_THREADS says otherwise), and pt-online-schema-change
# is left out when older than 3.6 (Debian 12's 3.2.1 uses statements MySQL 8.4
# removed; the report says so). Raw logs go to
# bench/out/<timestamp>/ (one directory per run: the tool's log, sysbench's
# per-second log, the heartbeat lag samples, timings). A complete run (all
# loads, all tools, ≥ 1M rows) overwrites bench/RESULTS.md; others write
# bench/out/<timestamp>/RESULTS.md (a partial run of ≥ 10M rows on mariadb-10.11, the
# headline run, writes bench/RESULTS-10M.md). recast runs twice: `recast` (the default,
# lock-free copy) and `recast-share` (`--copy-lock=share`, the locking copy).
# --recast-variant NAME='FLAGS' adds a tool
# recast-NAME: recast with extra flags (e.g. nochecksum='--checksum=false'),
# run wherever recast runs. --resume DIR continues an interrupted
# run in DIR: finished runs are kept, the rates measured then are reused.
#
# Only processes started here are stopped, by pid. Binary logs are purged
# between runs (after the replica has caught up) to keep the disk usage low.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
export PATH="$PATH:/usr/sbin:/usr/local/go/bin"

ROWS=1000000
ONLY=idle,light,heavy
ALL_TOOLS=native-inplace,native-copy,ptosc,recast,recast-share
TOOLS=$ALL_TOOLS
IDLE_REPEAT=4 # even: each tool's runs then sit at as many odd as even places in the sequence (ABBA)
MAX_TPS=""
RESUME=""
KEEP_SANDBOX=0
FLAVOR=mariadb-10.11
PORT=${BENCH_PORT:-14306}
RPORT=$((PORT + 1))
SB_DIR=.sandbox/bench
THREADS=8          # sysbench threads
LIGHT_PCT=10
HEAVY_PCT=40
BASELINE=${BENCH_BASELINE:-65} # seconds of load before the alter starts (65: two of the kernel's 31 s write-back periods, whose bursts set the p99 of a light load; 20 until session 15)
TAIL=${BENCH_TAIL:-10}         # seconds of load after it ends
MAXTPS_TIME=${BENCH_MAXTPS_TIME:-35}
BUFFER_POOL=${BENCH_BUFFER_POOL:-1G}
TOOL_TIMEOUT=${BENCH_TOOL_TIMEOUT:-60m} # a tool running longer is stopped (20m until session 22: its paced copies of 1M rows took 6-22 min on MariaDB 11.8, bench/RESULTS-mariadb-11.8.md)
RECAST_FLAGS=${RECAST_FLAGS:-}   # extra recast migrate flags (recorded)
RECAST_SRC=auto  # auto: working tree, else the newest commit that builds
RECAST_BIN=""
declare -A VARIANTS=([share]=--copy-lock=share) # recast-share: the locking copy, next to the lock-free default
VARIANT_NAMES=""
QUIET_MAX=${BENCH_QUIET_MAX:-30}         # wait before a run until the machine is at most this % busy...
QUIET_TIMEOUT=${BENCH_QUIET_TIMEOUT:-30} # ...but no longer than this (s); 0: do not wait
DIRTY_MAX=${BENCH_DIRTY_MAX:-32}           # before each run (idle ones too since session 24), wait until the page cache holds at most this many MiB dirty or under write-back...
DIRTY_PAGES_MAX=${BENCH_DIRTY_PAGES_MAX:-1024} # ...and the buffer pools of the primary and the replica at most this many dirty pages (flushed meanwhile)...
DIRTY_TIMEOUT=${BENCH_DIRTY_TIMEOUT:-60}   # ...but no longer than this (s); 0: do not wait
NICE=${BENCH_NICE:-}     # nice value of the bench and everything it starts (default: -10 as root)
MIN_FREE_GB=${BENCH_MIN_FREE_GB:-8}
REPLICA_THREADS=${BENCH_REPLICA_THREADS:-0} # slave_parallel_threads (MySQL: replica_parallel_workers) on the replica (0: serial)
USER_=recast
PASS=recast
DB=sbtest
TABLE=sbtest1

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

while [ $# -gt 0 ]; do
	case $1 in
	--rows) ROWS=$2; shift 2 ;;
	--only) ONLY=$2; shift 2 ;;
	--tools) TOOLS=$2; shift 2 ;;
	--idle-repeat) IDLE_REPEAT=$2; shift 2 ;;
	--max-tps) MAX_TPS=$2; shift 2 ;;
	--resume) RESUME=$2; shift 2 ;;
	--keep-sandbox) KEEP_SANDBOX=1; shift ;;
	--flavor) FLAVOR=$2; shift 2 ;;
	--recast-src) RECAST_SRC=$2; shift 2 ;;
	--recast-bin) RECAST_BIN=$2; shift 2 ;;
	--recast-variant)
		[[ $2 == *=* ]] || { echo "bench: --recast-variant NAME='FLAGS'" >&2; exit 2; }
		VARIANTS[${2%%=*}]=${2#*=}
		VARIANT_NAMES+=",recast-${2%%=*}"
		shift 2
		;;
	-h | --help) usage; exit 0 ;;
	*) echo "bench: unknown argument $1" >&2; usage >&2; exit 2 ;;
	esac
done

ts() { date +%H:%M:%S; }
say() { printf '\033[1m[%s] %s\033[0m\n' "$(ts)" "$*"; }
note() { printf '[%s] %s\n' "$(ts)" "$*"; }
die() { printf '\033[31m[%s] bench: %s\033[0m\n' "$(ts)" "$*" >&2; exit 1; }
now_ms() { date +%s%3N; }

IS_MYSQL=0
case $FLAVOR in
mariadb-10.11 | mariadb-11.8) ;;
mysql-9.7) IS_MYSQL=1 ;;
*) die "--flavor: unknown flavor $FLAVOR (mariadb-10.11, mariadb-11.8, mysql-9.7)" ;;
esac
RESULTS_MD=$ROOT/bench/RESULTS.md
[ "$FLAVOR" = mariadb-10.11 ] || RESULTS_MD=$ROOT/bench/RESULTS-$FLAVOR.md
for l in ${ONLY//,/ }; do
	case $l in idle | light | heavy) ;; *) die "--only: unknown load $l (idle, light, heavy)" ;; esac
done
for t in ${TOOLS//,/ }; do
	case $t in native-inplace | native-copy | ptosc | recast | recast-*) ;; *) die "--tools: unknown tool $t ($ALL_TOOLS)" ;; esac
done
has() { [[ ",$1," == *",$2,"* ]]; } # has LIST ITEM
# On MySQL 8.4+ pt-online-schema-change before 3.6 fails (SHOW SLAVE STATUS,
# SHOW SLAVE HOSTS, ... are gone): it is left out and the report says why.
PTOSC_WHY=""
if [ "$IS_MYSQL" = 1 ]; then
	PTOSC_VERSION=$(pt-online-schema-change --version 2>/dev/null | awk '{print $2}') || PTOSC_VERSION=""
	if [ -z "$PTOSC_VERSION" ]; then
		PTOSC_WHY="not run on $FLAVOR: pt-online-schema-change is not installed"
	elif [ "$(printf '%s\n' "$PTOSC_VERSION" 3.6.0 | sort -V | head -1)" != 3.6.0 ]; then
		PTOSC_WHY="not run on $FLAVOR: pt-online-schema-change $PTOSC_VERSION uses statements MySQL 8.4 removed"
	fi
fi
if [ -n "$PTOSC_WHY" ] && has "$TOOLS" ptosc; then
	[ "$TOOLS" = "$ALL_TOOLS" ] || note "--tools: ptosc left out ($PTOSC_WHY)"
	with=""
	for t in ${TOOLS//,/ }; do
		[ "$t" = ptosc ] || with+=",$t"
	done
	TOOLS=${with#,}
	[ -n "$TOOLS" ] || die "--tools: nothing left to run ($PTOSC_WHY)"
fi
# Variants run right after recast, wherever recast runs.
if [ -n "$VARIANT_NAMES" ]; then
	has "$TOOLS" recast || TOOLS+=",recast"
	with=""
	for t in ${TOOLS//,/ }; do
		has "$VARIANT_NAMES" "$t" && continue
		with+=",$t"
		[ "$t" = recast ] && with+=$VARIANT_NAMES
	done
	TOOLS=${with#,}
fi

# --- prerequisites ------------------------------------------------------------------
need=()
if [ "$IS_MYSQL" = 1 ]; then
	# the server comes from scripts/fetch-flavor.sh; the harness's client is MariaDB's
	command -v mariadb >/dev/null 2>&1 || command -v mysql >/dev/null 2>&1 || need+=(mariadb-client)
else
	command -v mariadbd >/dev/null 2>&1 || need+=(mariadb-server mariadb-client)
fi
command -v sysbench >/dev/null 2>&1 || need+=(sysbench)
[ "$IS_MYSQL" = 1 ] || command -v pt-online-schema-change >/dev/null 2>&1 || need+=(percona-toolkit)
if [ ${#need[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || die "missing ${need[*]}; install them (apt-get install ${need[*]})"
	say "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q "${need[@]}" || { apt-get update -q && apt-get install -y -q "${need[@]}"; }
fi
command -v go >/dev/null 2>&1 || die "go is not installed (expected in /usr/local/go/bin)"
MYSQL=$(command -v mariadb || command -v mysql) || die "no mariadb client"

# The machine may be shared (other engineers' test servers): run the bench,
# the sandbox servers it starts and the tools at a higher CPU and I/O
# priority, so that their load skews the numbers less. Only our own process
# (and thus our children) is reniced, and the scheduler autogroup of our
# session (with autogroups, CPU is shared between sessions first).
if [ -z "$NICE" ]; then
	NICE=0
	[ "$(id -u)" -eq 0 ] && NICE=-10
fi
if [ "$NICE" != 0 ]; then
	renice -n "$NICE" -p $$ >/dev/null || die "renice -n $NICE failed (set BENCH_NICE=0)"
	if [ -w /proc/$$/autogroup ]; then
		echo "$NICE" >/proc/$$/autogroup 2>/dev/null || true
	fi
	ionice -c2 -n0 -p $$ 2>/dev/null || true
fi

# --- output directory and binaries -----------------------------------------------------
if [ -n "$RESUME" ]; then
	[ -d "$RESUME/runs" ] || [ -f "$RESUME/setup.env" ] || die "--resume $RESUME: not a bench output directory"
	OUT=$(cd "$RESUME" && pwd)
else
	OUT=$ROOT/bench/out/$(date +%Y%m%d-%H%M%S)
fi
mkdir -p "$OUT/bin" "$OUT/runs"
RECAST=$OUT/bin/recast
RB=$OUT/bin/recastbench
try_build() { # try_build SRC_DIR: build recast from SRC_DIR into $RECAST
	(cd "$1" && go build -o "$RECAST" ./cmd/recast) >>"$OUT/bin/build.log" 2>&1
}
snapshot_src() { # snapshot_src DIR REV|worktree: the source of one build, kept as bin/src.tar.gz
	rm -rf "$1"
	mkdir -p "$1"
	if [ "$2" = worktree ]; then
		tar -c --exclude-vcs cmd internal go.mod go.sum | tar -x -C "$1"
	else
		git archive "$2" cmd internal go.mod go.sum | tar -x -C "$1"
	fi
}
build_recast() {
	local src=$OUT/bin/src c tried=()
	if [ -n "$RECAST_BIN" ]; then
		cp "$RECAST_BIN" "$RECAST"
		c=$(dirname "$RECAST_BIN")
		if [ -f "$c/source" ]; then # a binary of an earlier bench run: keep its provenance
			echo "$(cat "$c/source"); the binary of ${c%/bin}, reused with --recast-bin" >"$OUT/bin/source"
			[ -f "$c/src.tar.gz" ] && cp "$c/src.tar.gz" "$OUT/bin/"
		else
			echo "binary $RECAST_BIN (given with --recast-bin)" >"$OUT/bin/source"
		fi
		return 0
	fi
	case $RECAST_SRC in
	auto | worktree)
		snapshot_src "$src" worktree
		if try_build "$src"; then
			echo "working tree at $(date -u +%H:%MZ) (HEAD $(git rev-parse --short HEAD) + $(git status --porcelain -- cmd internal go.mod go.sum | grep -c .) changed or new files; source in bin/src.tar.gz)" >"$OUT/bin/source"
		elif [ "$RECAST_SRC" = worktree ]; then
			die "the working tree does not build (see $OUT/bin/build.log)"
		else
			tried=(worktree)
			for c in $(git rev-list -n 15 HEAD); do
				snapshot_src "$src" "$c"
				if try_build "$src"; then
					echo "commit $(git rev-parse --short "$c") \"$(git log -1 --format=%s "$c" | cut -c1-70)\" (the newest commit that builds on its own: the working tree and $((${#tried[@]} - 1)) newer commit(s) did not build when the bench started)" >"$OUT/bin/source"
					break
				fi
				tried+=("$c")
			done
			[ -f "$OUT/bin/source" ] || die "no buildable recast in the working tree or the last 15 commits (see $OUT/bin/build.log)"
		fi
		;;
	*)
		snapshot_src "$src" "$RECAST_SRC"
		try_build "$src" || die "recast at $RECAST_SRC does not build (see $OUT/bin/build.log)"
		echo "commit $(git rev-parse --short "$RECAST_SRC") \"$(git log -1 --format=%s "$RECAST_SRC" | cut -c1-70)\"" >"$OUT/bin/source"
		;;
	esac
	tar -czf "$OUT/bin/src.tar.gz" -C "$src" .
	rm -rf "$src"
}
if [ ! -x "$RECAST" ] || [ ! -x "$RB" ]; then
	say "building recast ($RECAST_SRC) and recastbench into $OUT/bin (pinned for this run)"
	: >"$OUT/bin/build.log"
	build_recast
	go build -o "$RB" ./bench/cmd/recastbench
	note "recast: $(cat "$OUT/bin/source")"
fi
say "output: $OUT"

sql() { # sql PORT ARGS...
	local port=$1
	shift
	"$MYSQL" --protocol=TCP -h127.0.0.1 -P"$port" -u"$USER_" -p"$PASS" "$@"
}
q() { sql "$1" -N -B -e "$2"; } # q PORT STATEMENT: one value

free_gb() { df -P -BG "$ROOT" | awk 'NR==2 { sub("G", "", $4); print $4 }'; }
check_disk() {
	local f
	f=$(free_gb)
	[ "$f" -ge "$MIN_FREE_GB" ] || die "only ${f}G free on $(df -P "$ROOT" | awk 'NR==2 {print $6}') (need $MIN_FREE_GB G)"
}

# --- process bookkeeping: we only ever stop pids we started ---------------------------------
SB_PID=""
MON_PID=""
TOOL_PID=""
SANDBOX_UP=0
stop_pid() { # stop_pid PID [GRACE_SECONDS]
	local pid=$1 grace=${2:-10} i
	[ -n "$pid" ] || return 0
	kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < grace * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null || true
}
cleanup() {
	local rc=$?
	set +e
	stop_pid "$TOOL_PID" 30
	stop_pid "$SB_PID"
	stop_pid "$MON_PID"
	if [ "$SANDBOX_UP" = 1 ] && [ "$KEEP_SANDBOX" = 0 ]; then
		note "removing the sandbox ($SB_DIR)"
		"$RECAST" sandbox down --dir "$SB_DIR" >/dev/null || rc=1
	elif [ "$SANDBOX_UP" = 1 ]; then
		note "sandbox kept: $RECAST sandbox down --dir $SB_DIR"
	fi
	[ "$rc" -eq 0 ] || printf '\033[31mbench FAILED (exit %d); logs in %s\033[0m\n' "$rc" "$OUT" >&2
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- sandbox ------------------------------------------------------------------------------
check_disk
if [ -e "$SB_DIR/sandbox.json" ]; then
	say "removing the sandbox left in $SB_DIR"
	"$RECAST" sandbox down --dir "$SB_DIR"
fi
say "starting the sandbox: primary 127.0.0.1:$PORT, replica 127.0.0.1:$RPORT"
SANDBOX_UP=1
"$RECAST" sandbox up --dir "$SB_DIR" --port "$PORT" --replicas 1 --flavor "$FLAVOR" --quiet >"$OUT/sandbox.txt"
for p in "$PORT" "$RPORT"; do
	# both instances: the table and the copy being built fit in memory
	sql "$p" -e "SET GLOBAL innodb_buffer_pool_size = $(numfmt --from=iec "$BUFFER_POOL")"
done
if [ "$IS_MYSQL" = 1 ]; then
	# MySQL's default is 4 workers; serial is 1 (0 is no longer accepted: it becomes 1)
	sql "$RPORT" -e "STOP REPLICA; SET GLOBAL replica_parallel_workers = $((REPLICA_THREADS > 0 ? REPLICA_THREADS : 1)); START REPLICA"
elif [ "$REPLICA_THREADS" -gt 0 ]; then
	sql "$RPORT" -e "STOP SLAVE; SET GLOBAL slave_parallel_threads = $REPLICA_THREADS; SET GLOBAL slave_parallel_mode = 'optimistic'; START SLAVE"
fi
sql "$PORT" -e "CREATE DATABASE $DB; CREATE DATABASE bench_meta;
	CREATE TABLE bench_meta.dsns (id INT AUTO_INCREMENT PRIMARY KEY, parent_id INT NULL, dsn VARCHAR(255) NOT NULL);
	INSERT INTO bench_meta.dsns (dsn) VALUES ('h=127.0.0.1,P=$RPORT,u=$USER_,p=$PASS');
	CREATE TABLE bench_meta.heartbeat (id TINYINT PRIMARY KEY, ts DATETIME(6) NOT NULL) ENGINE=InnoDB;
	INSERT INTO bench_meta.heartbeat VALUES (1, NOW(6))"

SYSBENCH_CONN=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$PORT" --mysql-user="$USER_" --mysql-password="$PASS"
	--mysql-db="$DB" --tables=1 --table-size="$ROWS")

wait_replica() { # wait_replica TIMEOUT: the replica has applied all of the primary's binlog
	local gtid r
	if [ "$IS_MYSQL" = 1 ]; then
		# the sandbox runs MySQL with gtid_mode=ON (newlines: one line per server UUID)
		gtid=$(q "$PORT" "SELECT REPLACE(@@GLOBAL.gtid_executed, '\n', '')")
		r=$(q "$RPORT" "SELECT WAIT_FOR_EXECUTED_GTID_SET('$gtid', ${1:-900})") || r=error
		[ "$r" = 0 ]
		return
	fi
	gtid=$(q "$PORT" "SELECT @@gtid_binlog_pos")
	r=$(q "$RPORT" "SELECT MASTER_GTID_WAIT('$gtid', ${1:-900})") || r=error
	[ "$r" = 0 ]
}
purge_binlogs() {
	wait_replica 900 || die "the replica did not catch up within 15 min"
	sql "$PORT" -e "FLUSH BINARY LOGS; PURGE BINARY LOGS BEFORE NOW()"
	sql "$RPORT" -e "FLUSH BINARY LOGS; PURGE BINARY LOGS BEFORE NOW()"
}

say "sysbench oltp_read_write prepare: $ROWS rows in $DB.$TABLE"
t0=$(now_ms)
sysbench oltp_read_write "${SYSBENCH_CONN[@]}" prepare >"$OUT/prepare.log" 2>&1 || die "sysbench prepare failed (see $OUT/prepare.log)"
note "prepared in $(( ($(now_ms) - t0) / 1000 )) s; rebuilding once (not measured) so that every tool starts from a rebuilt table"
sql "$PORT" "$DB" -e "ALTER TABLE $TABLE FORCE"
purge_binlogs

# --- machine facts, set-up and commands ----------------------------------------------------
RECAST_HELP=$("$RECAST" migrate -h 2>&1 || true)
RECAST_THREADS="absent"
if grep -qE '^\s+-threads\b' <<<"$RECAST_HELP"; then
	RECAST_THREADS="present (default $(grep -A1 -E '^\s+-threads\b' <<<"$RECAST_HELP" | grep -o 'default [0-9]*' | awk '{print $2}'), not passed)"
fi
if [ ! -f "$OUT/machine.env" ]; then
	{
		echo "host=$(hostname), $(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r)"
		echo "CPU=$(nproc) × $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
		echo "memory=$(free -g | awk '/^Mem:/ {print $2}') GiB"
		echo "disk=$(df -h "$ROOT" | awk 'NR==2 {print $2 " total, " $4 " free"}') at start"
		echo "server=$(q "$PORT" "SELECT VERSION()") (--flavor $FLAVOR)"
		echo "pt-online-schema-change=$(pt-online-schema-change --version 2>&1 | awk '{print $2}') (Debian package percona-toolkit $(dpkg-query -W -f='${Version}' percona-toolkit 2>/dev/null))${PTOSC_WHY:+; $PTOSC_WHY}"
		echo "sysbench=$(sysbench --version | awk '{print $2}') (Debian package $(dpkg-query -W -f='${Version}' sysbench 2>/dev/null))"
		echo "recast=$(cat "$OUT/bin/source"), built with $(go version | awk '{print $3}'); --threads flag: $RECAST_THREADS"
		echo "load average at start=$(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared: other engineers' test servers may run during the bench)"
	} >"$OUT/machine.env"
	ps -eo pid,pcpu,etime,args --sort=-pcpu | head -15 >"$OUT/ps-start.txt"
fi
# tools left out on purpose: recastbench report names them with the reason
if [ -n "$PTOSC_WHY" ]; then
	echo "ptosc=$PTOSC_WHY" >"$OUT/not-run.env"
else
	rm -f "$OUT/not-run.env"
fi

RECAST_CMD=("$RECAST" migrate --host 127.0.0.1 --port "$PORT" --user "$USER_" --password "$PASS"
	--database "$DB" --table "$TABLE" --alter FORCE --execute --drop-old-table --progress-interval 1s)
# shellcheck disable=SC2206
[ -n "$RECAST_FLAGS" ] && RECAST_CMD+=($RECAST_FLAGS)
PTOSC_CMD=(pt-online-schema-change --alter "ENGINE=InnoDB" --execute --no-check-replication-filters
	--recursion-method="dsn=h=127.0.0.1,P=$PORT,u=$USER_,p=$PASS,D=bench_meta,t=dsns" --max-lag 1
	"h=127.0.0.1,P=$PORT,u=$USER_,p=$PASS,D=$DB,t=$TABLE")
tool_cmd() { # tool_cmd TOOL: sets CMD
	case $1 in
	native-inplace) CMD=("$MYSQL" --protocol=TCP -h127.0.0.1 -P"$PORT" -u"$USER_" -p"$PASS" "$DB" -e "ALTER TABLE $TABLE FORCE, ALGORITHM=INPLACE") ;;
	native-copy) CMD=("$MYSQL" --protocol=TCP -h127.0.0.1 -P"$PORT" -u"$USER_" -p"$PASS" "$DB" -e "ALTER TABLE $TABLE FORCE, ALGORITHM=COPY") ;;
	ptosc | ptosc-nops) CMD=("${PTOSC_CMD[@]}") ;;
	recast) CMD=("${RECAST_CMD[@]}") ;;
	recast-*)
		# shellcheck disable=SC2206
		CMD=("${RECAST_CMD[@]}" ${VARIANTS[${1#recast-}]})
		;;
	esac
}
sysbench_cmd() { # sysbench_cmd RATE PSMODE: sets SBCMD
	SBCMD=(sysbench oltp_write_only "${SYSBENCH_CONN[@]}" --threads="$THREADS" --rate="$1" --time=3600
		--report-interval=1 --percentile=99)
	[ "$2" = disable ] && SBCMD+=(--db-ps-mode=disable)
	return 0
}
shown() { # print a command, quoted for a shell, with the bench's binaries as bin/
	local out="" a
	for a in "$@"; do
		a=${a//$OUT\/bin\//bin/}
		if [[ $a =~ [^A-Za-z0-9_./:=,@%+-] ]]; then
			a="'${a//\'/\'\\\'\'}'"
		fi
		out+="$a "
	done
	echo "${out% }"
}

# --- rates -------------------------------------------------------------------------------
if [ -f "$OUT/setup.env" ] && grep -q '^light rate' "$OUT/setup.env"; then
	LIGHT=$(grep '^light rate' "$OUT/setup.env" | grep -oE '[0-9]+ tps' | head -1 | awk '{print $1}')
	HEAVY=$(grep '^heavy rate' "$OUT/setup.env" | grep -oE '[0-9]+ tps' | head -1 | awk '{print $1}')
	MAX=$(grep '^max tps' "$OUT/setup.env" | grep -oE '[0-9]+ tps' | head -1 | awk '{print $1}')
	note "resuming with the rates measured before: max $MAX, light $LIGHT, heavy $HEAVY tps"
	echo "resumed=at $(date -u +%H:%MZ) on a new sandbox and table (runs finished before were kept: $(find "$OUT/runs" -name run.env -exec grep -l '^done=1$' {} + 2>/dev/null | wc -l))" >>"$OUT/setup.env"
else
	if [ -n "$MAX_TPS" ]; then
		MAX=$MAX_TPS
		MAX_HOW="given with --max-tps"
	elif has "$ONLY" light || has "$ONLY" heavy; then
		say "measuring the maximum: oltp_write_only --threads=$THREADS, no --rate, ${MAXTPS_TIME} s"
		sysbench oltp_write_only "${SYSBENCH_CONN[@]}" --threads="$THREADS" --time="$MAXTPS_TIME" --report-interval=1 \
			--percentile=99 run >"$OUT/maxtps.log" 2>&1 || die "sysbench failed (see $OUT/maxtps.log)"
		MAX=$("$RB" sbmean --skip 5 "$OUT/maxtps.log")
		MAX_HOW="measured: mean of the per-second tps after 5 s, ${MAXTPS_TIME} s run, see maxtps.log"
	else
		MAX=0
		MAX_HOW="not measured (idle only)"
	fi
	LIGHT=$(((MAX * LIGHT_PCT / 100 + 5) / 10 * 10))
	HEAVY=$(((MAX * HEAVY_PCT / 100 + 5) / 10 * 10))
	note "max $MAX tps -> light $LIGHT, heavy $HEAVY tps"
	{
		echo "max tps=$MAX tps ($MAX_HOW)"
		echo "light rate=$LIGHT tps (≈ $LIGHT_PCT % of max)"
		echo "heavy rate=$HEAVY tps (≈ $HEAVY_PCT % of max)"
	} >"$OUT/setup.env"
	purge_binlogs
fi
if ! grep -q '^table' "$OUT/setup.env"; then
	{
		echo "table=sysbench \`$DB.$TABLE\`, $ROWS rows ($(q "$PORT" "SELECT ROUND((data_length+index_length)/1048576) FROM information_schema.tables WHERE table_schema='$DB' AND table_name='$TABLE'") MiB data+index), rebuilt once before the runs"
		if [ "$IS_MYSQL" = 1 ]; then
			echo "sandbox=\`recast sandbox up --dir $SB_DIR --port $PORT --replicas 1 --flavor $FLAVOR\` (non-fast: innodb_flush_log_at_trx_commit=$(q "$PORT" "SELECT @@innodb_flush_log_at_trx_commit"), sync_binlog=$(q "$PORT" "SELECT @@sync_binlog"), doublewrite on), gtid_mode=$(q "$PORT" "SELECT @@gtid_mode"), binlog ROW/FULL, max_binlog_size=$(($(q "$PORT" "SELECT @@max_binlog_size") / 1048576))M, innodb_redo_log_capacity=$(($(q "$PORT" "SELECT @@innodb_redo_log_capacity") / 1048576))M, replica with replica_parallel_workers=$(q "$RPORT" "SELECT IF(@@replica_parallel_workers <= 1, CONCAT(@@replica_parallel_workers, ' (serial)'), CONCAT(@@replica_parallel_workers, ' (replica_preserve_commit_order=', @@replica_preserve_commit_order, ')'))") (set after start; MySQL's default is 4), log_replica_updates"
		else
			echo "sandbox=\`recast sandbox up --dir $SB_DIR --port $PORT --replicas 1\` (non-fast: innodb_flush_log_at_trx_commit=$(q "$PORT" "SELECT @@innodb_flush_log_at_trx_commit"), sync_binlog=$(q "$PORT" "SELECT @@sync_binlog"), doublewrite on), binlog ROW/FULL, max_binlog_size=$(($(q "$PORT" "SELECT @@max_binlog_size") / 1048576))M, innodb_log_file_size=$(($(q "$PORT" "SELECT @@innodb_log_file_size") / 1048576))M, replica with slave_parallel_threads=$(q "$RPORT" "SELECT IF(@@slave_parallel_threads = 0, '0 (serial)', CONCAT(@@slave_parallel_threads, ' (', @@slave_parallel_mode, ')'))"), log_slave_updates"
		fi
		echo "buffer pool=$BUFFER_POOL on primary and replica (SET GLOBAL after start; the sandbox default is 256M, less than the table plus its copy)"
		if [ "$IS_MYSQL" = 1 ]; then
			echo "between runs=the replica catches up (WAIT_FOR_EXECUTED_GTID_SET with the primary's gtid_executed), then FLUSH + PURGE BINARY LOGS BEFORE NOW() on both"
		else
			echo "between runs=the replica catches up (MASTER_GTID_WAIT), then FLUSH + PURGE BINARY LOGS BEFORE NOW() on both"
		fi
		echo "under load=sysbench starts ${BASELINE} s before the alter (first 5 s = warm-up, not in the baseline) and stops ${TAIL} s after it"
		echo "idle runs=each tool $IDLE_REPEAT times, round-robin (odd rounds in the tools' order, even ones reversed$( [ $((IDLE_REPEAT % 2)) = 1 ] && [ "$IDLE_REPEAT" -gt 1 ] && echo '; an odd count: not balanced, the first tool runs first and last')); the ratios use the medians"
		if [ "$DIRTY_TIMEOUT" != 0 ]; then
			echo "before each run=it waits up to $DIRTY_TIMEOUT s until the page cache holds at most $DIRTY_MAX MiB dirty or under write-back and the primary's and the replica's buffer pools at most $DIRTY_PAGES_MAX dirty pages, which they flush meanwhile (innodb_max_dirty_pages_pct 0, restored after): the run before's binlogs and pages otherwise come back as write-back bursts in the next baseline, or in the next idle run's wall time"
		fi
		echo "priority=the bench and everything it starts (sandbox servers, sysbench, the tools) run at nice $NICE (process and session autogroup: $(cat /proc/$$/autogroup 2>/dev/null || echo n/a)), I/O class best-effort 0; before each run it waits up to $QUIET_TIMEOUT s for the machine to be ≤ $QUIET_MAX % busy"
		[ -n "$RECAST_FLAGS" ] && echo "extra recast flags=$RECAST_FLAGS"
		for v in "${!VARIANTS[@]}"; do
			echo "variant recast-$v=recast with ${VARIANTS[$v]}"
		done
		echo "10M-row headline run=bench/RESULTS-10M.md (bench/run.sh --rows 10000000 --only idle,light --tools recast,ptosc --idle-repeat 1)"
	} >>"$OUT/setup.env"
fi
if [ ! -f "$OUT/commands.md" ]; then
	{
		echo "Sandbox and table:"
		echo
		if [ "$IS_MYSQL" = 1 ]; then
			echo "    $(shown "$RECAST" sandbox up --dir "$SB_DIR" --port "$PORT" --replicas 1 --flavor "$FLAVOR")"
			echo "    STOP REPLICA; SET GLOBAL replica_parallel_workers = $((REPLICA_THREADS > 0 ? REPLICA_THREADS : 1)); START REPLICA   -- replica"
		else
			echo "    $(shown "$RECAST" sandbox up --dir "$SB_DIR" --port "$PORT" --replicas 1)"
		fi
		echo "    SET GLOBAL innodb_buffer_pool_size = $(numfmt --from=iec "$BUFFER_POOL")   -- primary and replica"
		echo "    $(shown sysbench oltp_read_write "${SYSBENCH_CONN[@]}" prepare)"
		echo
		echo "Maximum rate:"
		echo
		echo "    $(shown sysbench oltp_write_only "${SYSBENCH_CONN[@]}" --threads="$THREADS" --time="$MAXTPS_TIME" --report-interval=1 --percentile=99 run)"
		echo
		if [ -n "$PTOSC_WHY" ]; then
			echo "Foreground load (light/heavy):"
		else
			echo "Foreground load (light/heavy; pt-osc is run a second time with \`--db-ps-mode=disable\`, MDEV-26048):"
		fi
		echo
		sysbench_cmd RATE auto
		echo "    $(shown "${SBCMD[@]}" run)"
		echo
		echo "The tools (each run is wrapped by \`recastbench exec\`, which records wall time, exit code and peak RSS):"
		echo
		for t in native-inplace native-copy ptosc recast recast-share; do
			if [ "$t" = ptosc ] && [ -n "$PTOSC_WHY" ]; then
				echo "    # pt-online-schema-change: $PTOSC_WHY"
				continue
			fi
			tool_cmd "$t"
			echo "    $(shown "${CMD[@]}")"
		done
		echo
		if [ "$IS_MYSQL" = 1 ]; then
			echo "Application deadlocks and lock-wait timeouts: sysbench retries errors 1213, 1205 and 1020 (its \`--mysql-ignore-errors\` default) and counts them in \`err/s\` (*app errors*); the server's counters \`lock_deadlocks\`, \`lock_timeouts\` (information_schema.INNODB_METRICS) and \`Innodb_row_lock_waits\` (performance_schema.global_status) are read before and after the tool (*server deadlocks / lock-wait timeouts / row-lock waits*, any session, the tool's included)."
			echo
			echo "Replica lag: \`recastbench monitor --flavor $FLAVOR\` (heartbeat on the primary every 100 ms into \`bench_meta.heartbeat\`, read on the replica every 100 ms; SHOW REPLICA STATUS every 500 ms)."
			echo
			echo "Clients: sysbench 1.0.20 and the \`mariadb\` client link MariaDB Connector/C; the recast user's caching_sha2_password is authenticated in full without TLS (Connector/C fetches the server's RSA public key), so the commands are the same as on MariaDB."
		else
			echo "Application deadlocks and lock-wait timeouts: sysbench retries errors 1213, 1205 and 1020 (its \`--mysql-ignore-errors\` default) and counts them in \`err/s\` (*app errors*); the server's counters \`Innodb_deadlocks\`, \`lock_timeouts\` (information_schema.INNODB_METRICS) and \`Innodb_row_lock_waits\` are read before and after the tool (*server deadlocks / lock-wait timeouts / row-lock waits*, any session, the tool's included)."
			echo
			echo "Replica lag: \`recastbench monitor\` (heartbeat on the primary every 100 ms into \`bench_meta.heartbeat\`, read on the replica every 100 ms; SHOW SLAVE STATUS every 500 ms). pt-osc watches the same replica through the DSN table \`bench_meta.dsns\`."
		fi
		echo
		if [ "$IS_MYSQL" = 1 ]; then
			echo "Reproduce: \`bench/run.sh --rows $ROWS --flavor $FLAVOR\` (the server: \`scripts/fetch-flavor.sh $FLAVOR\`)."
		else
			echo "Reproduce: \`bench/run.sh --rows $ROWS\` (or \`make bench\`)."
		fi
	} >"$OUT/commands.md"
fi

# --- one run ----------------------------------------------------------------------------------
SANDBOX_PIDS=$(jq -r '[.sandbox.primary.pid] + [.sandbox.replicas[].pid] | map(tostring) | join(",")' "$SB_DIR/sandbox.json")
QUIET_INFO=""
wait_quiet() { # wait until the machine is quiet (other engineers' tests share it), up to QUIET_TIMEOUT s
	local busy t0 waited
	t0=$(date +%s)
	while :; do
		busy=$("$RB" cpu busy --window 3s)
		waited=$(($(date +%s) - t0))
		[ "$busy" -le "$QUIET_MAX" ] && break
		if [ "$waited" -ge "$QUIET_TIMEOUT" ]; then
			note "$1: the machine is still ${busy}% busy after ${waited} s; running anyway"
			break
		fi
		[ "$waited" -lt 4 ] && note "$1: machine ${busy}% busy (others' processes); waiting up to ${QUIET_TIMEOUT} s for ≤ ${QUIET_MAX}%"
	done
	QUIET_INFO="quiet_wait=busy ${busy}% before the run after waiting ${waited} s"
}
WRITEBACK_INFO=""
bp_dirty() { # bp_dirty PORT: the server's dirty buffer pool pages (0 if it cannot tell)
	# awk prints a number even when the query fails (no line): an empty
	# answer would break the caller's arithmetic.
	q "$1" "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'" 2>/dev/null | awk 'NR == 1 {v = $2} END {print v + 0}'
}
wait_writeback() { # wait until the run before's writes are on disk, up to DIRTY_TIMEOUT s
	# The kernel writes a file's dirty pages back 30 s after they were first
	# dirtied, all at once: the binlogs the run before wrote (sync_binlog=0,
	# MariaDB's default) then come back as a 50-200 ms second of the next
	# run's baseline (session 18: a 204 ms second in the lock-free copy's
	# light baseline, 9.8 ms by the mean against 2.7-3.8 for its neighbours).
	# And InnoDB flushes the run before's dirty pages for minutes (session 18,
	# MariaDB 11.8: 200-790 ms seconds in baselines with the page cache clean
	# and a 60 s wait for the checkpoint age): both servers flush them now,
	# innodb_max_dirty_pages_pct at 0 while the bench waits, restored after.
	local t0 waited dirty pages p saved
	declare -A saved_pct=() saved_lwm=()
	for p in "$PORT" "$RPORT"; do
		saved=$(q "$p" "SELECT CONCAT(@@GLOBAL.innodb_max_dirty_pages_pct, ' ', @@GLOBAL.innodb_max_dirty_pages_pct_lwm)" 2>/dev/null) || continue
		saved_pct[$p]=${saved% *}
		saved_lwm[$p]=${saved#* }
		q "$p" "SET GLOBAL innodb_max_dirty_pages_pct_lwm = 0, GLOBAL innodb_max_dirty_pages_pct = 0" >/dev/null 2>&1 || true
	done
	t0=$(date +%s)
	while :; do
		dirty=$(awk '$1 == "Dirty:" || $1 == "Writeback:" {kb += $2} END {print int(kb / 1024)}' /proc/meminfo)
		pages=$(($(bp_dirty "$PORT") + $(bp_dirty "$RPORT")))
		waited=$(($(date +%s) - t0))
		[ "$dirty" -le "$DIRTY_MAX" ] && [ "$pages" -le "$DIRTY_PAGES_MAX" ] && break
		if [ "$waited" -ge "$DIRTY_TIMEOUT" ]; then
			note "$1: still ${dirty} MiB dirty in the page cache and ${pages} dirty pages in the buffer pools after ${waited} s; running anyway"
			break
		fi
		sleep 1
	done
	for p in "${!saved_pct[@]}"; do
		q "$p" "SET GLOBAL innodb_max_dirty_pages_pct = ${saved_pct[$p]}, GLOBAL innodb_max_dirty_pages_pct_lwm = ${saved_lwm[$p]}" >/dev/null ||
			note "$1: could not restore innodb_max_dirty_pages_pct on port $p"
	done
	WRITEBACK_INFO="writeback_wait=${dirty} MiB dirty or under write-back, ${pages} dirty buffer pool pages (primary and replica), after waiting ${waited} s"
}
fix_leftovers() { # drop what an interrupted pt-osc or recast left behind
	local t
	for t in ins upd del; do
		sql "$PORT" -e "DROP TRIGGER IF EXISTS $DB.pt_osc_${DB}_${TABLE}_$t" 2>/dev/null || true
	done
	"$RECAST" cleanup --host 127.0.0.1 --port "$PORT" --user "$USER_" --password "$PASS" --database "$DB" --table "$TABLE" >/dev/null 2>&1 || true
	sql "$PORT" -e "DROP TABLE IF EXISTS $DB._${TABLE}_new, $DB._${TABLE}_old"
	[ "$(q "$PORT" "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='$DB' AND table_name='$TABLE'")" = 1 ] ||
		die "$DB.$TABLE is gone (see the last run's log)"
}

lock_counters() { # lock_counters: "DEADLOCKS TIMEOUTS ROW_LOCK_WAITS" (server-wide; n/a where a counter is missing)
	local d t w
	if [ "$IS_MYSQL" = 1 ]; then
		# MySQL: no Innodb_deadlocks status variable, no information_schema.GLOBAL_STATUS
		d=$(q "$PORT" "SELECT COUNT FROM information_schema.INNODB_METRICS WHERE NAME = 'lock_deadlocks'" 2>/dev/null) || d=""
		t=$(q "$PORT" "SELECT COUNT FROM information_schema.INNODB_METRICS WHERE NAME = 'lock_timeouts'" 2>/dev/null) || t=""
		w=$(q "$PORT" "SELECT VARIABLE_VALUE FROM performance_schema.global_status WHERE VARIABLE_NAME = 'Innodb_row_lock_waits'" 2>/dev/null) || w=""
		echo "${d:-n/a} ${t:-n/a} ${w:-n/a}"
		return
	fi
	d=$(q "$PORT" "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_DEADLOCKS'" 2>/dev/null) || d=""
	# lock_timeouts is enabled by default (MariaDB: ENABLED, MySQL: STATUS)
	t=$(q "$PORT" "SELECT COUNT FROM information_schema.INNODB_METRICS WHERE NAME = 'lock_timeouts'" 2>/dev/null) || t=""
	w=$(q "$PORT" "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_ROW_LOCK_WAITS'" 2>/dev/null) || w=""
	echo "${d:-n/a} ${t:-n/a} ${w:-n/a}"
}
counter_delta() { # counter_delta BEFORE AFTER
	if [[ $1 =~ ^[0-9]+$ && $2 =~ ^[0-9]+$ ]]; then echo $(($2 - $1)); else echo n/a; fi
}

run_one() { # run_one LOAD TOOL REP
	local load=$1 tool=$2 rep=$3 name rate=0 ps=auto dir rc sb_rc=none a dl0 lt0 rw0 dl1 lt1 rw1
	name=$tool
	[ "$load" = idle ] && name=$tool-$rep
	dir=$OUT/runs/$load/$name
	if grep -qs '^done=1$' "$dir/run.env"; then
		note "$load $name: done earlier, kept"
		return 0
	fi
	rm -rf "$dir"
	mkdir -p "$dir"
	[ "$load" = light ] && rate=$LIGHT
	[ "$load" = heavy ] && rate=$HEAVY
	[ "$tool" = ptosc-nops ] && ps=disable

	check_disk
	fix_leftovers
	purge_binlogs
	WRITEBACK_INFO=""
	# Idle runs wait too (session 24), so that no idle run's wall time
	# holds the run before's write-back. In the same order every time,
	# recast's idle runs came right after pt-osc's and recast-share's after
	# recast's: session 24's run read the lock-free copy's median 15.4 s
	# against the locking copy's 14.6 s (session 23's 16.0 against 15.6),
	# an idle-only run of the two with no pt-osc between 11.4 against
	# 11.6 s. Waiting did not remove the difference (14.8 against 14.0 s,
	# bench/out/20261128-043758), so the order alternates too (the idle loop
	# below).
	[ "$DIRTY_TIMEOUT" = 0 ] || wait_writeback "$load $name"
	wait_quiet "$load $name"
	"$RB" cpu mark --pids "$$,$SANDBOX_PIDS" --out "$dir/cpu.mark"
	{
		echo "tool=$tool"
		echo "load=$load"
		echo "rep=$rep"
		echo "rate=$rate"
		echo "ps_mode=$ps"
		echo "rows=$(q "$PORT" "SELECT COUNT(*) FROM $DB.$TABLE")"
	} >"$dir/run.env"

	"$RB" monitor --primary "127.0.0.1:$PORT" --replica "127.0.0.1:$RPORT" --user "$USER_" --password "$PASS" \
		--flavor "$FLAVOR" --out "$dir/lag.tsv" 2>"$dir/monitor.err" &
	MON_PID=$!
	echo "mon_start_ms=$(now_ms)" >>"$dir/run.env"
	if [ "$load" != idle ]; then
		sysbench_cmd "$rate" "$ps"
		echo "sysbench=$(shown "${SBCMD[@]}" run)" >>"$dir/run.env"
		echo "sb_start_ms=$(now_ms)" >>"$dir/run.env"
		"${SBCMD[@]}" run >"$dir/sysbench.log" 2>&1 &
		SB_PID=$!
		sleep "$BASELINE"
		kill -0 "$SB_PID" 2>/dev/null || note "$load $name: sysbench exited before the alter (see $dir/sysbench.log)"
	else
		sleep 3
	fi

	tool_cmd "$tool"
	echo "cmd=$(shown "${CMD[@]}")" >>"$dir/run.env"
	echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$dir/run.env"
	read -r dl0 lt0 rw0 <<<"$(lock_counters)"
	note "$load $name: $(shown "${CMD[@]}" | cut -c1-110)..."
	"$RB" exec --timeout "$TOOL_TIMEOUT" --out "$dir/exec.env" -- "${CMD[@]}" >"$dir/tool.log" 2>&1 &
	TOOL_PID=$!
	rc=0
	wait "$TOOL_PID" || rc=$?
	TOOL_PID=""
	echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$dir/run.env"
	read -r dl1 lt1 rw1 <<<"$(lock_counters)"
	echo "deadlocks_during=$(counter_delta "$dl0" "$dl1")" >>"$dir/run.env"
	echo "lock_timeouts_during=$(counter_delta "$lt0" "$lt1")" >>"$dir/run.env"
	echo "row_lock_waits_during=$(counter_delta "$rw0" "$rw1")" >>"$dir/run.env"

	if [ -n "$SB_PID" ]; then
		sleep "$TAIL"
		if kill -0 "$SB_PID" 2>/dev/null; then
			stop_pid "$SB_PID"
			sb_rc=stopped
		else
			wait "$SB_PID" && sb_rc=0 || sb_rc=$?
			sb_rc="exited early ($sb_rc)"
		fi
		SB_PID=""
		echo "sb_stop_ms=$(now_ms)" >>"$dir/run.env"
		echo "sysbench_end=$sb_rc" >>"$dir/run.env"
	fi
	a=$(now_ms)
	if wait_replica 900; then
		echo "replica_catchup_s=$(( ($(now_ms) - a) / 1000 ))" >>"$dir/run.env"
	else
		echo "replica_catchup_s=timeout" >>"$dir/run.env"
	fi
	sleep 1
	echo "mon_end_ms=$(now_ms)" >>"$dir/run.env"
	stop_pid "$MON_PID"
	MON_PID=""
	"$RB" cpu since --pids "$$,$SANDBOX_PIDS" --in "$dir/cpu.mark" >>"$dir/run.env" || true
	echo "$QUIET_INFO" >>"$dir/run.env"
	[ -z "$WRITEBACK_INFO" ] || echo "$WRITEBACK_INFO" >>"$dir/run.env"

	[ "$rc" -eq 0 ] || fix_leftovers
	local p r
	p=$(q "$PORT" "CHECKSUM TABLE $DB.$TABLE" | awk '{print $2}')
	r=$(q "$RPORT" "CHECKSUM TABLE $DB.$TABLE" | awk '{print $2}')
	if [ -n "$p" ] && [ "$p" = "$r" ]; then
		echo "replica_consistent=yes" >>"$dir/run.env"
	else
		echo "replica_consistent=NO (checksum $p vs $r)" >>"$dir/run.env"
	fi
	echo "done=1" >>"$dir/run.env"

	"$RB" report --dir "$OUT" --tsv "$OUT/results.tsv" --out "$OUT/RESULTS.md" --keep-notes "$RESULTS_MD" ||
		note "report failed"
	awk -F'\t' -v l="$load" -v t="$tool" -v r="$rep" '$1==l && $2==t && $3==r {
		printf "    -> exit %s, wall %.1f s", $4, $5
		if ($6 > 0) printf ", tps %.0f -> %.0f (rate %s), p99 %.1f -> %.1f ms", $7, $8, $6, $9, $10
		printf ", replica lag max %.2f s", $12; if ($18 != "") printf ", others CPU %s", $18
		if ($14 > 0) printf ", RSS %.0f MiB", $14
		if ($6 > 0) printf ", app errors %s, server deadlocks %s, lock-wait timeouts %s, row-lock waits %s", $21, $19, $20, $23
		if ($22 != "") printf ", copy lock %s", $22
		if ($16 != "") printf ", sysbench: %s", substr($16, 1, 90)
		if ($17 != "") printf "\n    -> %s", $17
		printf "\n" }' "$OUT/results.tsv"
}

# --- the runs ---------------------------------------------------------------------------------
for load in idle light heavy; do
	has "$ONLY" "$load" || continue
	if [ "$load" = idle ]; then
		say "idle: $TOOLS, $IDLE_REPEAT times each"
		# Odd repetitions in the order of --tools, even ones in reverse, so
		# that each tool does not always follow the same one (recast
		# followed pt-osc in every repetition until session 24). With an
		# even count (the default, 4) the order is balanced (A B B A A B B
		# A): a drift of the machine over the set, or runs alternating
		# slow and fast, weigh on every tool alike; with an odd count the
		# first tool takes the first and the last places, and the most of
		# whatever the set's first and last runs share (session 28).
		for rep in $(seq 1 "$IDLE_REPEAT"); do
			order=${TOOLS//,/ }
			[ $((rep % 2)) = 0 ] && order=$(printf '%s\n' $order | tac | tr '\n' ' ')
			for tool in $order; do
				run_one idle "$tool" "$rep"
			done
		done
	else
		rate=$LIGHT
		[ "$load" = heavy ] && rate=$HEAVY
		[ "$rate" -gt 0 ] || die "no rate for $load (max tps unknown)"
		say "$load load: oltp_write_only --threads=$THREADS --rate=$rate; $TOOLS"
		for tool in ${TOOLS//,/ }; do
			run_one "$load" "$tool" 1
			[ "$tool" = ptosc ] && run_one "$load" ptosc-nops 1
		done
	fi
done

# --- report -------------------------------------------------------------------------------------
complete=1
for load in idle light heavy; do
	for tool in ${ALL_TOOLS//,/ } ptosc-nops; do
		[ "$load" = idle ] && [ "$tool" = ptosc-nops ] && continue
		[ -n "$PTOSC_WHY" ] && [[ $tool == ptosc* ]] && continue # left out on purpose
		if [ "$load" = idle ]; then
			ls "$OUT/runs/idle/$tool"-*/run.env >/dev/null 2>&1 || complete=0
		else
			grep -qs '^done=1$' "$OUT/runs/$load/$tool/run.env" || complete=0
		fi
	done
done
"$RB" report --dir "$OUT" --tsv "$OUT/results.tsv" --out "$OUT/RESULTS.md" --keep-notes "$RESULTS_MD"
if [ "$complete" = 1 ] && [ "$ROWS" -lt 1000000 ]; then
	complete=0
	note "fewer than 1,000,000 rows: a smoke run, bench/RESULTS.md is not replaced"
fi
headline=0 # the headline run: idle and light, recast and pt-osc, done
if [ "$complete" = 0 ] && [ "$ROWS" -ge 10000000 ] && [ "$FLAVOR" = mariadb-10.11 ]; then
	headline=1
	for tool in recast ptosc; do
		ls "$OUT/runs/idle/$tool"-*/run.env >/dev/null 2>&1 || headline=0
		grep -qs '^done=1$' "$OUT/runs/light/$tool/run.env" || headline=0
	done
fi
if [ "$headline" = 1 ]; then
	# A subset of tools and loads; its observations are its own file's,
	# not the complete run's. (A 10M run without them, an idle-only one
	# say, leaves the headline as it is.)
	"$RB" report --dir "$OUT" --tsv "$OUT/results.tsv" --out "$ROOT/bench/RESULTS-10M.md" --keep-notes "$ROOT/bench/RESULTS-10M.md"
	say "10M-row headline run: bench/RESULTS-10M.md written"
fi
if [ "$complete" = 1 ]; then
	cp "$OUT/RESULTS.md" "$RESULTS_MD"
	say "complete run: ${RESULTS_MD#"$ROOT"/} written (raw logs: ${OUT#"$ROOT"/})"
else
	say "partial run: results in ${OUT#"$ROOT"/}/RESULTS.md (bench/RESULTS.md is only replaced by a complete run)"
fi
column -t -s$'\t' "$OUT/results.tsv" | cut -c1-200
