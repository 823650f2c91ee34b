#!/usr/bin/env bash
# bench/lateindex.sh: issue 14's optional question, measured on the server
# alone: is a copy faster when the new table's secondary indexes are built
# after it (a sorted in-place build before the cut-over) instead of row by
# row during it, and what does that cost the replica?
#
#   bench/lateindex.sh [--flavor mariadb-10.11|mariadb-11.8|mysql-9.7]
#                      [--rows N] [--chunk ROWS] [--rate TPS] [--repeat N]
#                      [--keep-sandbox]
#
# On a sandbox with a serial replica (as bench/run.sh's), the sysbench table
# is copied with chunk-shaped statements run by the server itself (a stored
# procedure: INSERT IGNORE … SELECT of --chunk rows (5000) by primary key
# range, autocommit, READ COMMITTED, back to back: recast's unpaced copy
# without recast) into
#   full  a table like sbtest1, its secondary index k_1 included
#   late  the same without k_1, then ALTER TABLE … ADD INDEX k_1 (k),
#         ALGORITHM=INPLACE, LOCK=NONE
# --repeat times each (2), alternating. Per phase: the copy's and the index
# build's seconds, the replica's lag at most (a heartbeat row written on the
# primary every 100 ms, read on the replica every 100 ms, both on this
# machine's clock) and how long after the phase's end the replica had it
# all. With --rate, sysbench oltp_write_only --threads=8 --rate=TPS runs
# throughout and the report adds the mean of its per-second p99 per phase
# (× a first phase without a copy).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH:/usr/sbin"
# shellcheck source=bench/lib.sh
. bench/lib.sh

FLAVOR=mariadb-10.11 ROWS=1000000 CHUNK=5000 RATE=0 REPEAT=2 KEEP=0
PORT=${BENCH_PORT:-14706}
while [ $# -gt 0 ]; do
	case $1 in
	--flavor) FLAVOR=$2; shift 2 ;;
	--rows) ROWS=$2; shift 2 ;;
	--chunk) CHUNK=$2; shift 2 ;;
	--rate) RATE=$2; shift 2 ;;
	--repeat) REPEAT=$2; shift 2 ;;
	--keep-sandbox) KEEP=1; shift ;;
	*) echo "lateindex: unknown argument $1" >&2; exit 2 ;;
	esac
done

bench_start lateindex "$PORT" "$FLAVOR"
BG=()
down() {
	local p
	for p in "${BG[@]}"; do kill "$p" 2>/dev/null || true; done
	[ "$KEEP" = 1 ] || "$RECAST" sandbox down --dir "$SB_DIR" >/dev/null 2>&1 || true
	rm -rf "$OUT/bin"
}
trap down EXIT
bench_servers "$PORT" "$FLAVOR"
sql "$PORT" -e "CREATE DATABASE IF NOT EXISTS sbtest"
sb_opts "$PORT" "$ROWS"
say "$FLAVOR: sysbench prepare, $ROWS rows"
sysbench oltp_read_write "${SB[@]}" prepare >"$OUT/prepare.log" 2>&1
sql "$PORT" sbtest <<SQL
CREATE TABLE hb (id INT PRIMARY KEY, ts DATETIME(6) NOT NULL);
INSERT INTO hb VALUES (1, NOW(6));
DELIMITER //
CREATE PROCEDURE copy_all(IN dst VARCHAR(64))
BEGIN
  DECLARE lo BIGINT DEFAULT 0;
  DECLARE hi BIGINT;
  SELECT MAX(id) INTO hi FROM sbtest1;
  SET @q = CONCAT('INSERT IGNORE INTO ', dst, ' SELECT * FROM sbtest1 WHERE id > ? AND id <= ?');
  PREPARE s FROM @q;
  WHILE lo < hi DO
    SET @lo = lo, @hi = lo + $CHUNK;
    EXECUTE s USING @lo, @hi;
    SET lo = lo + $CHUNK;
  END WHILE;
  DEALLOCATE PREPARE s;
END //
DELIMITER ;
SQL

T0=$(date +%s.%N)
now() { python3 -c "import time; print(f'{time.time() - $T0:.2f}')"; }
# The heartbeat and the replica's view of it: "seconds lag" every 100 ms.
(while :; do sql "$PORT" sbtest -e "UPDATE hb SET ts = NOW(6) WHERE id = 1"; sleep 0.1; done) >/dev/null 2>&1 &
BG+=($!)
(while :; do
	echo "$(now) $(sql $((PORT + 1)) sbtest -N -e "SELECT TIMESTAMPDIFF(MICROSECOND, ts, NOW(6)) / 1e6 FROM hb WHERE id = 1" 2>/dev/null || echo -)"
	sleep 0.1
done) >"$OUT/lag.tsv" 2>/dev/null &
BG+=($!)
if [ "$RATE" -gt 0 ]; then
	say "sysbench oltp_write_only --threads=8 --rate=$RATE"
	sysbench oltp_write_only "${SB[@]}" --threads=8 --rate="$RATE" --time=7200 --report-interval=1 --percentile=99 run >"$OUT/sysbench.log" 2>&1 &
	BG+=($!)
fi
SB_T0=$(now)

# caught_up: waits until the replica has the primary's heartbeat of now.
caught_up() {
	local want
	want=$(sql "$PORT" sbtest -N -e "UPDATE hb SET ts = NOW(6) WHERE id = 1; SELECT ts FROM hb WHERE id = 1")
	for _ in $(seq 6000); do
		[ "$(sql $((PORT + 1)) sbtest -N -e "SELECT ts >= '$want' FROM hb WHERE id = 1" 2>/dev/null)" = 1 ] && return 0 # (hb reaches the replica after the prepare)
		sleep 0.1
	done
	say "the replica did not catch up in 600 s"
	return 1
}
PH=$OUT/phases
: >"$PH"
a=$(now)
sleep 10
echo "base $a $(now)" >>"$PH" # with --rate: ten seconds of the load alone
for r in $(seq "$REPEAT"); do
	for mode in full late; do
		sql "$PORT" sbtest -e "DROP TABLE IF EXISTS g; CREATE TABLE g LIKE sbtest1"
		[ "$mode" = full ] || sql "$PORT" sbtest -e "ALTER TABLE g DROP INDEX k_1"
		caught_up
		sleep 5
		a=$(now)
		sql "$PORT" sbtest -e "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; CALL copy_all('g')"
		b=$(now)
		c=$b
		if [ "$mode" = late ]; then
			sql "$PORT" sbtest -e "ALTER TABLE g ADD INDEX k_1 (k), ALGORITHM=INPLACE, LOCK=NONE"
			c=$(now)
		fi
		caught_up
		d=$(now)
		echo "$mode $a $b $c $d" >>"$PH"
		say "$mode #$r: copy $(python3 -c "print(f'{$b - $a:.1f}')") s, index $(python3 -c "print(f'{$c - $b:.1f}')") s, replica had it all $(python3 -c "print(f'{$d - $c:.1f}')") s later"
	done
done
for p in "${BG[@]}"; do kill "$p" 2>/dev/null || true; done
BG=()
sleep 1
[ "$RATE" -gt 0 ] && p99_series "$OUT/sysbench.log" >"$OUT/p99.tsv" || : >"$OUT/p99.tsv"
python3 - "$OUT" "$FLAVOR" "$ROWS" "$CHUNK" "$RATE" "$SB_T0" <<'EOF' | tee "$OUT/lateindex.md"
import statistics as st, sys
out, flavor, rows, chunk, rate, sb0 = sys.argv[1:]
sb0 = float(sb0)
lag = [(float(v[0]), float(v[1])) for v in (l.split() for l in open(out + "/lag.tsv")) if len(v) == 2 and v[1] != "-"]
p99 = dict((int(a), float(b)) for a, b in (l.split() for l in open(out + "/p99.tsv")))
def p99_between(a, b):
    v = [p99[s] for s in range(int(a - sb0) + 1, int(b - sb0) + 1) if s in p99]
    return st.mean(v) if v else None
ph = [l.split() for l in open(out + "/phases")]
base = None
load = f", sysbench oltp_write_only --rate={rate}" if rate != "0" else ", idle"
print(f"| {flavor}, {int(rows):,} rows, chunks of {chunk}{load} | copy s | index build s | copy + index s | replica lag max s | replica done after s | p99 mean ms (× base) |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, *t in ph:
    if name == "base":
        base = p99_between(float(t[0]), float(t[1]))
        continue
    a, b, c, d = map(float, t)
    m = max((l for s, l in lag if a <= s <= d), default=0)
    p = p99_between(a, c)
    ps = f"{p:.1f} (× {p / base:.1f})" if p and base else "-"
    idx = f"{c - b:.1f}" if name == "late" else "-"
    print(f"| {name} | {b - a:.1f} | {idx} | {c - a:.1f} | {m:.1f} | {d - c:.1f} | {ps} |")
EOF
