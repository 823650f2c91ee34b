#!/usr/bin/env bash
# bench/mechanism.sh: what a copy chunk costs the application, without
# recast: bare chunk-shaped statements run by the server itself (a stored
# procedure, so no client's CPU is added), at a fixed rhythm, under a steady
# light load, with parts of the chunk's path taken away one at a time.
#
#   bench/mechanism.sh [--flavor mariadb-10.11|mariadb-11.8|mysql-9.7]
#                      [--rows N] [--rate TPS] [--chunk ROWS] [--every MS]
#                      [--hold S] [--phases LIST] [--binlog-size SIZE]
#                      [--keep-sandbox]
#
# One sysbench `oltp_write_only --threads=8 --rate=TPS` (420) runs throughout
# on a sandbox with a serial replica (as bench/run.sh's); over it, phases of
# --hold seconds (30) with gaps in which the replica catches up:
#   base        nothing else
#   marks       two one-row autocommit writes every --every ms: a lock-free
#               chunk's commits without its rows (its low watermark and a
#               commit)
#   read        a chunk's read only: SELECT over --chunk rows (1000) of the
#               table's primary key range, every --every ms (100)
#   copy        the chunk: INSERT IGNORE … SELECT of those rows into a copy
#               of the table in READ COMMITTED, autocommit, every --every ms
#   copy-norepl the same with the replica's SQL thread stopped: the
#               replica's replay of the chunk's rows taken away (started
#               again, and caught up, after the phase)
#   copy-nobin  the same with sql_log_bin=0: no binlog write, no dump,
#               no replay
#   base-again  nothing else
# --binlog-size sets the primary's max_binlog_size (the sandbox's is 64M,
# the servers' default 1G; on the replica too; a phase named size-SIZE sets it to SIZE and
# runs a copy). --phases picks some of them, in the order given (base first: the ratios
# are to the first phase).
# Prints per phase the mean and median of sysbench's per-second p99 (the
# first 5 s left out), × base, the chunks' mean duration, and the CPU
# (share of one core) of the primary and the replica.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH:/usr/sbin"
# shellcheck source=bench/lib.sh
. bench/lib.sh

FLAVOR=mariadb-10.11 ROWS=1000000 RATE=420 CHUNK=1000 EVERY=100 HOLD=30 KEEP=0
PHASE_LIST=base,marks,read,copy,copy-norepl,copy-nobin,base-again BINLOG_SIZE=
PORT=${BENCH_PORT:-14606}
while [ $# -gt 0 ]; do
	case $1 in
	--flavor) FLAVOR=$2; shift 2 ;;
	--rows) ROWS=$2; shift 2 ;;
	--rate) RATE=$2; shift 2 ;;
	--chunk) CHUNK=$2; shift 2 ;;
	--every) EVERY=$2; shift 2 ;;
	--hold) HOLD=$2; shift 2 ;;
	--phases) PHASE_LIST=$2; shift 2 ;;
	--binlog-size) BINLOG_SIZE=$2; shift 2 ;;
	--keep-sandbox) KEEP=1; shift ;;
	*) echo "mechanism: unknown argument $1" >&2; exit 2 ;;
	esac
done

bench_start mechanism "$PORT" "$FLAVOR"
down() {
	[ -z "${SBPID:-}" ] || kill "$SBPID" 2>/dev/null || true
	[ "$KEEP" = 1 ] || "$RECAST" sandbox down --dir "$SB_DIR" >/dev/null 2>&1 || true
	rm -rf "$OUT/bin"
}
trap down EXIT
read -r PPID_SRV RPID_SRV < <(sandbox_pids "$SB_DIR")
bench_servers "$PORT" "$FLAVOR"
# binlog_size SIZE: max_binlog_size on the primary and the replica (its
# binlog, and its relay log: max_relay_log_size is 0).
binlog_size() { local p; for p in "$PORT" $((PORT + 1)); do sql "$p" -e "SET GLOBAL max_binlog_size = $(numfmt --from=iec "$1")"; done; }
[ -z "$BINLOG_SIZE" ] || binlog_size "$BINLOG_SIZE"
if [[ $FLAVOR == mysql-* ]]; then
	STOP_SQL="STOP REPLICA SQL_THREAD" START_SQL="START REPLICA SQL_THREAD"
else
	STOP_SQL="STOP SLAVE SQL_THREAD" START_SQL="START SLAVE SQL_THREAD"
fi
sql "$PORT" -e "CREATE DATABASE IF NOT EXISTS sbtest"
sb_opts "$PORT" "$ROWS"
say "$FLAVOR: sysbench prepare, $ROWS rows"
sysbench oltp_read_write "${SB[@]}" prepare >"$OUT/prepare.log" 2>&1
# The procedures: mode 1 marks, 2 read, 3 copy. Each returns the mean time
# of its chunks in ms.
sql "$PORT" sbtest <<SQL
CREATE TABLE cp LIKE sbtest1;
CREATE TABLE wm (slot INT PRIMARY KEY, mark BIGINT NOT NULL);
DELIMITER //
CREATE PROCEDURE chunks(IN secs INT, IN mode INT)
BEGIN
  DECLARE lo BIGINT DEFAULT 0;
  DECLARE n INT DEFAULT 0;
  DECLARE t0 DATETIME(6);
  DECLARE busy BIGINT DEFAULT 0;
  DECLARE t1 DATETIME(6);
  DECLARE x BIGINT;
  SET t0 = NOW(6);
  WHILE TIMESTAMPDIFF(SECOND, t0, NOW(6)) < secs DO
    SET t1 = NOW(6);
    IF mode = 1 THEN
      REPLACE INTO wm VALUES (1, n);
      REPLACE INTO wm VALUES (2, n);
    ELSEIF mode = 2 THEN
      SELECT SUM(LENGTH(c) + LENGTH(pad) + k) INTO x FROM sbtest1 WHERE id > lo AND id <= lo + $CHUNK;
    ELSE
      INSERT IGNORE INTO cp SELECT * FROM sbtest1 WHERE id > lo AND id <= lo + $CHUNK;
    END IF;
    SET busy = busy + TIMESTAMPDIFF(MICROSECOND, t1, NOW(6));
    SET n = n + 1;
    SET lo = (lo + $CHUNK) % ($ROWS - $CHUNK);
    DO SLEEP($EVERY / 1000);
  END WHILE;
  SELECT n AS chunks, busy / n / 1000 AS mean_ms;
END //
DELIMITER ;
SQL

PHASES=$OUT/phases
: >"$PHASES"
mark() {
	echo "$(($(date +%s) - T0)) $*" >>"$PHASES"
	echo "$(date +%s.%N) $(ticks "$PPID_SRV") $(ticks "$RPID_SRV")" >>"$OUT/cpu"
}
caught_up() {
	local want
	want=$(sql "$PORT" -N -e "SELECT COUNT(*) FROM sbtest.cp")
	for _ in $(seq 300); do
		[ "$(sql $((PORT + 1)) -N -e "SELECT COUNT(*) FROM sbtest.cp")" = "$want" ] && return 0
		sleep 1
	done
	say "the replica did not catch up in 300 s"
	return 1
}

say "sysbench oltp_write_only --threads=8 --rate=$RATE; chunks of $CHUNK rows every $EVERY ms"
sysbench oltp_write_only "${SB[@]}" --threads=8 --rate="$RATE" --time=7200 --report-interval=1 --percentile=99 run >"$OUT/sysbench.log" 2>&1 &
SBPID=$!
T0=$(date +%s)
# The page cache's dirty and writeback KiB each second (the binlogs and
# relay logs are written through it).
(while kill -0 "$SBPID" 2>/dev/null; do
	echo "$(($(date +%s) - T0)) $(awk '/^(Dirty|Writeback):/ {printf "%s ", $2}' /proc/meminfo)"
	sleep 1
done) >"$OUT/dirty" &
sleep 5
i=0
for phase in ${PHASE_LIST//,/ }; do
	i=$((i + 1))
	F=$OUT/$i-$phase.chunks # a phase may be named twice
	sql "$PORT" sbtest -e "TRUNCATE cp"
	caught_up
	sleep 5
	mark start "$phase"
	case $phase in
	base*) sleep "$HOLD"; echo "- -" >"$F" ;;
	marks) sql "$PORT" sbtest -N -e "CALL chunks($HOLD, 1)" >"$F" ;;
	read) sql "$PORT" sbtest -N -e "CALL chunks($HOLD, 2)" >"$F" ;;
	copy | size-*)
		[[ $phase != size-* ]] || binlog_size "${phase#size-}"
		sql "$PORT" sbtest -N -e "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; CALL chunks($HOLD, 3)" >"$F" ;;
	copy-norepl)
		sql $((PORT + 1)) -e "$STOP_SQL"
		sql "$PORT" sbtest -N -e "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; CALL chunks($HOLD, 3)" >"$F"
		;;
	copy-nobin) sql "$PORT" sbtest -N -e "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; SET SESSION sql_log_bin = 0; CALL chunks($HOLD, 3)" >"$F" ;;
	*) say "unknown phase $phase"; exit 2 ;;
	esac
	mark stop "$phase"
	if [ "$phase" = copy-norepl ]; then
		sql $((PORT + 1)) -e "$START_SQL"
	fi
	if [ "$phase" = copy-nobin ]; then
		sql "$PORT" sbtest -e "SET SESSION sql_log_bin = 0; TRUNCATE cp" # the replica never had these rows
	fi
	say "$phase done: $(cat "$F")"
	sleep 5
done
kill "$SBPID"
wait "$SBPID" 2>/dev/null || true
SBPID=

p99_series "$OUT/sysbench.log" >"$OUT/p99.tsv"
python3 - "$OUT" "$FLAVOR" "$RATE" "$CHUNK" "$EVERY" <<'EOF' | tee "$OUT/mechanism.md"
import statistics as st, sys
out, flavor, rate, chunk, every = sys.argv[1:]
p = dict((int(a), float(b)) for a, b in (l.split() for l in open(out + "/p99.tsv")))
ph = [l.split() for l in open(out + "/phases")]
cpu = [[float(x) for x in l.split()] for l in open(out + "/cpu")]
print(f"| phase ({flavor}, sysbench oltp_write_only --rate={rate}; {chunk} rows every {every} ms) | p99 mean ms | p99 median ms | × base (mean) | × base (median) | chunks | chunk ms | CPU primary | CPU replica |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
base = None
for i in range(0, len(ph), 2):
    a, b, name = int(ph[i][0]), int(ph[i + 1][0]), ph[i][2]
    v = [p[s] for s in range(a + 5, b + 1) if s in p]
    mean, med = st.mean(v), st.median(v)
    base = base or (mean, med)
    n, ms = open(f"{out}/{i // 2 + 1}-{name}.chunks").read().split()[:2]
    (t0, p0, r0), (t1, p1, r1) = cpu[i], cpu[i + 1]
    share = lambda d: f"{d / 100 / (t1 - t0) * 100:.0f} %"
    ms = ms if ms == "-" else f"{float(ms):.1f}"
    print(f"| {name} | {mean:.2f} | {med:.2f} | {mean / base[0]:.2f} | {med / base[1]:.2f} | {n} | {ms} | {share(p1 - p0)} | {share(r1 - r0)} |")
EOF
say "written $OUT/mechanism.md"
