#!/usr/bin/env bash
# bench/ab.sh: A/B of recast builds (or settings) under one steady load, on
# one sandbox, runs in the order given, so that A and B can alternate
# (A B A B) and drifts of the machine show.
#
#   bench/ab.sh [--flavor F] [--rate TPS] [--rows N] [--baseline S] [--probe] LABEL:BINARY[:REDO[:FLAGS[:BINLOG]]] ...
#
#   LABEL   a name for the run (its files are LABEL.*)
#   BINARY  a recast binary (build one per revision: git worktree + go build)
#   REDO    innodb_log_file_size for the run (e.g. 96M, 1G; MariaDB resizes
#           it online; ignored on MySQL); empty: leave it
#   FLAGS   extra flags for recast migrate (quoted, space-separated)
#   BINLOG  max_binlog_size for the run, on the primary and the replica
#           (e.g. 64M, the sandbox's, or 1G, the servers' default); empty:
#           leave it
#
# A sandbox of flavor F (--flavor, mariadb-10.11 by default; primary and a
# serial replica, buffer pool 1 GiB), a sysbench table of N rows (1M)
# rebuilt once; per run: wait until the checkpoint age is below 5 % of its
# maximum (the previous run's pages flushed; MySQL shows no checkpoint age:
# 30 s there), sysbench oltp_write_only --threads=8 --rate=TPS (500) for S s
# (--baseline, 20; 65 covers two of the kernel's 31 s write-back periods), then recast migrate --alter FORCE --drop-old-table (default pacing), then
# 10 s more. The first run after the table's preparation starts on a busier
# server (the preparation's pages still flushing): put a warm-up run first.
# Prints per run: wall time; sysbench's per-second p99 before (seconds
# 6–S) and during the run (mean, median, × before); seconds above 10 ms;
# the checkpoint age each second (MiB). With --probe, recast's pacing probe
# also runs from outside recast through each run (recastbench probe: a
# one-row autocommit upsert every 50 ms on a connection of its own), and the
# line shows its per-second p90 before and during the run, mean and × before:
# what the pacer sees, whatever its own baseline and decisions were (it adds
# 20 one-row commits a second to every run's load). With AB_LIMIT=S each
# recast run is stopped (SIGINT) after S seconds and what it left is removed
# (`recast cleanup`): the runs are compared over their first S seconds
# (sysbench's p99 and the rows copied by then, from the last progress
# line), e.g. a copy's first half at a load where its second takes an hour.
# Output in bench/out/ab-<timestamp>/.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH:/usr/sbin"
# shellcheck source=bench/lib.sh
. bench/lib.sh
RATE=500 ROWS=1000000 BASE=20 FLAVOR=mariadb-10.11 PROBE=0
LIMIT=${AB_LIMIT:-}
while [ $# -gt 0 ]; do
	case $1 in
	--flavor) FLAVOR=$2; shift 2 ;;
	--probe) PROBE=1; shift ;;
	--rate) RATE=$2; shift 2 ;;
	--rows) ROWS=$2; shift 2 ;;
	--baseline) BASE=$2; shift 2 ;;
	-*) echo "ab: unknown flag $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { echo "ab: no runs given (LABEL:BINARY[:REDO[:FLAGS[:BINLOG]]])" >&2; exit 2; }
OUT=bench/out/ab-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
[ "$PROBE" = 0 ] || go build -o "$OUT/recastbench" ./bench/cmd/recastbench
SB_DIR=.sandbox/ab PORT=${BENCH_PORT:-14506}
IFS=: read -r _ first _ <<<"$1"
"$first" sandbox up --dir "$SB_DIR" --port "$PORT" --replicas 1 --flavor "$FLAVOR" --quiet >"$OUT/sandbox.txt"
trap '"$first" sandbox down --dir "$SB_DIR" >/dev/null 2>&1 || true' EXIT
bench_servers "$PORT" "$FLAVOR"
sql "$PORT" -e "CREATE DATABASE sbtest"
sb_opts "$PORT" "$ROWS"
sysbench oltp_read_write "${SB[@]}" prepare >"$OUT/prepare.log" 2>&1
sql "$PORT" sbtest -e "ALTER TABLE sbtest1 FORCE"
age() { sql "$PORT" -N -e "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_checkpoint_age','Innodb_checkpoint_max_age')"; }
for spec in "$@"; do
	IFS=: read -r label bin redo flags binlog <<<"$spec"
	[ -z "$redo" ] || [[ $FLAVOR == mysql-* ]] || sql "$PORT" -e "SET GLOBAL innodb_log_file_size = $(numfmt --from=iec "$redo")"
	[ -z "$binlog" ] || for p in "$PORT" $((PORT + 1)); do sql "$p" -e "SET GLOBAL max_binlog_size = $(numfmt --from=iec "$binlog")"; done
	[[ $FLAVOR != mysql-* ]] || sleep 30
	for _ in $(seq 120); do
		[[ $FLAVOR != mysql-* ]] || break
		age | awk '{v[$1]=$2} END {exit !(v["Innodb_checkpoint_age"] < 0.05 * v["Innodb_checkpoint_max_age"])}' && break
		sleep 1
	done
	sysbench oltp_write_only "${SB[@]}" --threads=8 --rate="$RATE" --time=3600 --report-interval=1 --percentile=99 run \
		>"$OUT/$label.sysbench.log" 2>&1 &
	sbpid=$!
	prpid=""
	if [ "$PROBE" = 1 ]; then
		"$OUT/recastbench" probe --addr "127.0.0.1:$PORT" --out "$OUT/$label.probe" 2>"$OUT/$label.probe.err" &
		prpid=$!
	fi
	sleep "$BASE"
	(while kill -0 "$sbpid" 2>/dev/null; do age | awk '$1 == "Innodb_checkpoint_age" {print $2}'; sleep 1; done) >"$OUT/$label.ckpt" &
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086 # FLAGS are split on purpose
	migrate=("$bin" migrate --host 127.0.0.1 --port "$PORT" --user recast --password recast --database sbtest --table sbtest1
		--alter FORCE --execute --drop-old-table --progress-interval 1s $flags)
	if [ -n "$LIMIT" ]; then
		rc=0
		timeout -s INT "$LIMIT" "${migrate[@]}" >"$OUT/$label.log" 2>&1 || rc=$?
		t1=$(date +%s.%N)
		case $rc in
		0) ended="finished before the limit of ${LIMIT} s" ;;
		124) ended="stopped after ${LIMIT} s" ;;
		*) ended="failed (exit $rc)" ;;
		esac
		"$bin" cleanup --host 127.0.0.1 --port "$PORT" --user recast --password recast --database sbtest --table sbtest1 \
			>"$OUT/$label.cleanup.log" 2>&1
	else
		"${migrate[@]}" >"$OUT/$label.log" 2>&1
		t1=$(date +%s.%N)
	fi
	sleep 10
	kill "$sbpid" $prpid
	wait "$sbpid" $prpid 2>/dev/null || true
	p99_series "$OUT/$label.sysbench.log" >"$OUT/$label.p99"
	python3 - "$OUT/$label.p99" "$label" "${redo:-as is}${binlog:+, binlog $binlog}" "$t0" "$t1" "$BASE" "${prpid:+$OUT/$label.probe}" <<'PY' | tee -a "$OUT/ab.txt"
import statistics as st, sys
f, label, redo, t0, t1, base, probe = sys.argv[1:]
base = int(base)
v = dict((int(a), float(b)) for a, b in (l.split() for l in open(f)))
wall = float(t1) - float(t0)
before = [v[s] for s in range(6, base + 1) if s in v]
during = [v[s] for s in range(base + 1, base + 2 + int(wall)) if s in v]
if not before or not during:
    print(f"{label} (redo {redo}): wall {wall:.1f} s | too few sysbench seconds to compare")
    sys.exit()
mb, md = st.mean(before), st.median(before)
m, d = st.mean(during), st.median(during)
print(f"{label} (redo {redo}): wall {wall:.1f} s | p99 before mean {mb:.2f} ms, median {md:.2f} | during mean {m:.2f} (×{m / mb:.1f}), "
      f"median {d:.2f} (×{d / md:.1f}) | seconds above 10 ms: {sum(x > 10 for x in during)} of {len(during)}")
if probe:
    # The probe's p90 of each second (nearest rank), before (the baseline's
    # seconds, as sysbench's) and during the run; its first line opened
    # the connection.
    secs = {}
    for line in open(probe).readlines()[1:]:
        at, us, _ = line.split()
        secs.setdefault(int(at) // 1000, []).append(int(us) / 1000)
    def p90(xs):
        xs = sorted(xs)
        return xs[max(0, min(len(xs) - 1, round(0.9 * len(xs)) - 1))]
    a, b = float(t0), float(t1)
    pb = [p90(x) for s, x in secs.items() if a - base + 6 <= s < a]
    pd = [p90(x) for s, x in secs.items() if a <= s <= b]
    if pb and pd:
        print(f"{label} probe p90 of each second: before mean {st.mean(pb):.2f} ms, during mean {st.mean(pd):.2f} (×{st.mean(pd) / st.mean(pb):.1f})")
PY
	awk '{printf "%d ", $1 / 1048576} END {print "(checkpoint age, MiB, each second)"}' "$OUT/$label.ckpt" | tee -a "$OUT/ab.txt"
	if [ -n "$LIMIT" ]; then
		grep -o 'recast: [^ ]* \[copy\] copy [0-9.]*% ([0-9]*/~[0-9]* rows' "$OUT/$label.log" | tail -1 |
			sed "s/^/$label $ended: /" | tee -a "$OUT/ab.txt"
	fi
done
