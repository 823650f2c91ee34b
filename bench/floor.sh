#!/usr/bin/env bash
# bench/floor.sh: what the application's p99 pays for recast being there
# with its copy held — the binlog reader and the applier replaying the
# application's changes into the new table — before the copy costs anything.
#
#   bench/floor.sh [--flavor mariadb-10.11|mariadb-11.8|mysql-9.7] [--rows N]
#                  [--rate TPS] [--hold S] [--compare BIN] [--keep-sandbox]
#
# One sysbench `oltp_write_only --threads=8 --rate=TPS` runs throughout on a
# sandbox with a serial replica (as bench/run.sh's); over it, phases of
# --hold seconds with 10 s gaps:
#   base     nothing else
#   binlog   a plain binlog client (mariadb-binlog --read-from-remote-server;
#            MariaDB only): the cost of one more binlog dump
#   held     recast migrate … --alter FORCE with the copy held from the start
#            (--throttle-flag-file): its binlog reader, applier, heartbeat,
#            probe; stopped with SIGINT, then `recast cleanup`
#   held-again  the same again (repeat)
#   held-nopace the same with --max-latency-ratio 0: no latency probe (the
#            pacer's one-row write every 50 ms), so its share shows
# With --synced, two more phases end the run:
#   synced   recast migrate … --postpone-cut-over-flag-file, the copy
#            unpaced (--max-latency-ratio 0): measured from 30 s after the
#            copy and checksum are done (the cut-over postponed), so that it
#            shows the applier writing into a full new table, with its
#            secondary index, rather than the empty one of the held phases
#   base-again  nothing, after recast stopped: the drift of the run
# and prints per phase the mean and median of sysbench's per-second p99
# (the first 5 s of each phase left out), the server's commits and InnoDB
# fsyncs per second, and the CPU (share of one core, from /proc/PID/stat)
# of the primary, the replica and recast.
# With --compare BIN, two more phases run another recast binary the same way,
# interleaved with the build's (held, held-B, held-again, held-B-again,
# held-nopace), and with --synced three more (synced, synced-B,
# synced-again, synced-B-again): what a change to the pipeline costs or
# saves, in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH:/usr/sbin"
# shellcheck source=bench/lib.sh
. bench/lib.sh

FLAVOR=mariadb-10.11 ROWS=1000000 RATE=410 HOLD=30 KEEP=0 COMPARE= SYNCED=0
PORT=${BENCH_PORT:-14406}
while [ $# -gt 0 ]; do
	case $1 in
	--flavor) FLAVOR=$2; shift 2 ;;
	--rows) ROWS=$2; shift 2 ;;
	--rate) RATE=$2; shift 2 ;;
	--hold) HOLD=$2; shift 2 ;;
	--compare) COMPARE=$(realpath "$2"); shift 2 ;;
	--keep-sandbox) KEEP=1; shift ;;
	--synced) SYNCED=1; shift ;;
	*) echo "floor: unknown argument $1" >&2; exit 2 ;;
	esac
done

bench_start floor "$PORT" "$FLAVOR"
down() { [ "$KEEP" = 1 ] || "$RECAST" sandbox down --dir "$SB_DIR" >/dev/null 2>&1 || true; }
trap down EXIT
read -r PPID_SRV RPID_SRV < <(sandbox_pids "$SB_DIR")
bench_servers "$PORT" "$FLAVOR"
sql "$PORT" -e "CREATE DATABASE IF NOT EXISTS sbtest"
sb_opts "$PORT" "$ROWS"
say "$FLAVOR: sysbench prepare, $ROWS rows"
sysbench oltp_read_write "${SB[@]}" prepare >"$OUT/prepare.log" 2>&1

counters() {
	sql "$PORT" -N -e "SHOW GLOBAL STATUS WHERE Variable_name IN ('Binlog_commits','Com_commit','Innodb_data_fsyncs','Handler_write')" |
		awk -v t="$(date +%s.%N)" '{printf "%s %s %s\n", t, $1, $2}'
}
PHASES=$OUT/phases
: >"$PHASES"
mark() {
	echo "$(($(date +%s) - T0)) $*" >>"$PHASES"
	counters >>"$OUT/counters"
	echo "$(date +%s.%N) $(ticks "$PPID_SRV") $(ticks "$RPID_SRV") ${RECAST_TICKS:-0}" >>"$OUT/cpu"
}

say "sysbench oltp_write_only --threads=8 --rate=$RATE"
sysbench oltp_write_only "${SB[@]}" --threads=8 --rate="$RATE" --time=3600 --report-interval=1 --percentile=99 run >"$OUT/sysbench.log" 2>&1 &
SBPID=$!
T0=$(date +%s)
sleep 5
mark start base
sleep "$HOLD"
mark stop base
sleep 10
if [[ $FLAVOR != mysql-* ]]; then
	f=$(sql "$PORT" -N -e "SHOW MASTER STATUS" | awk '{print $1}')
	mark start binlog
	timeout "$HOLD" mariadb-binlog --read-from-remote-server --host=127.0.0.1 --port="$PORT" --user=recast --password=recast \
		--stop-never --verbose "$f" >/dev/null 2>&1 || true
	mark stop binlog
	sleep 10
fi
FLAG=$OUT/hold.flag
PHASE_LIST=(held held-again held-nopace)
[ -n "$COMPARE" ] && PHASE_LIST=(held held-B held-again held-B-again held-nopace)
for phase in "${PHASE_LIST[@]}"; do
	extra=()
	[ "$phase" = held-nopace ] && extra=(--max-latency-ratio 0)
	bin=$RECAST
	[[ $phase == held-B* ]] && bin=$COMPARE
	touch "$FLAG"
	RECAST_TICKS=0 mark start "$phase"
	"$bin" migrate --host 127.0.0.1 --port "$PORT" --user recast --password recast --database sbtest --table sbtest1 \
		--alter FORCE --execute --progress-interval 1s --throttle-flag-file "$FLAG" "${extra[@]}" >"$OUT/$phase.log" 2>&1 &
	pid=$!
	sleep "$HOLD"
	RECAST_TICKS=$(ticks "$pid") mark stop "$phase"
	kill -INT "$pid"
	wait "$pid" || true
	"$RECAST" cleanup --host 127.0.0.1 --port "$PORT" --user recast --password recast --database sbtest --table sbtest1 >>"$OUT/cleanup.log" 2>&1
	sleep 10
done
# synced PHASE BIN: a migration of BIN with the cut-over postponed, measured
# from 30 s after its copy and checksum are done.
synced() {
	local phase=$1 bin=$2 PFLAG=$OUT/postpone.flag pid t0
	touch "$PFLAG"
	"$bin" migrate --host 127.0.0.1 --port "$PORT" --user recast --password recast --database sbtest --table sbtest1 \
		--alter FORCE --execute --progress-interval 1s --max-latency-ratio 0 --postpone-cut-over-flag-file "$PFLAG" >"$OUT/$phase.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 1800); do
		grep -q "cut-over postponed" "$OUT/$phase.log" && break
		kill -0 "$pid" 2>/dev/null || { echo "floor: recast ended before the cut-over was postponed" >&2; exit 1; }
		sleep 1
	done
	grep -q "cut-over postponed" "$OUT/$phase.log" || { echo "floor: the cut-over was never postponed" >&2; exit 1; }
	sleep 30
	t0=$(ticks "$pid")
	mark start "$phase"
	sleep "$HOLD"
	RECAST_TICKS=$(($(ticks "$pid") - t0)) mark stop "$phase"
	kill -INT "$pid"
	wait "$pid" || true
	"$RECAST" cleanup --host 127.0.0.1 --port "$PORT" --user recast --password recast --database sbtest --table sbtest1 >>"$OUT/cleanup.log" 2>&1
	sleep 10
}
if [ "$SYNCED" = 1 ]; then
	synced synced "$RECAST"
	if [ -n "$COMPARE" ]; then
		synced synced-B "$COMPARE"
		synced synced-again "$RECAST"
		synced synced-B-again "$COMPARE"
	fi
	mark start base-again
	sleep "$HOLD"
	mark stop base-again
fi
kill "$SBPID"
wait "$SBPID" 2>/dev/null || true

p99_series "$OUT/sysbench.log" >"$OUT/p99.tsv"
python3 - "$OUT" "$FLAVOR" "$RATE" <<'EOF' | tee "$OUT/floor.md"
import statistics as st, sys
out, flavor, rate = sys.argv[1:]
p = dict((int(a), float(b)) for a, b in (l.split() for l in open(out + "/p99.tsv")))
ph = [l.split() for l in open(out + "/phases")]
c = {}
for l in open(out + "/counters"):
    t, k, v = l.split()
    c.setdefault(k, []).append((float(t), int(v)))
cpu = [[float(x) for x in l.split()] for l in open(out + "/cpu")]
print(f"| phase ({flavor}, sysbench oltp_write_only --rate={rate}) | p99 mean ms | p99 median ms | × base (mean) | commits/s | InnoDB fsyncs/s | CPU primary | CPU replica | CPU recast |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
base = None
for i in range(0, len(ph), 2):
    a, b, name = int(ph[i][0]), int(ph[i + 1][0]), ph[i][2]
    v = [p[s] for s in range(a + 5, b + 1) if s in p]
    mean = st.mean(v)
    base = base or mean
    def rate_of(k):
        if k not in c:
            return "–"
        (t0, v0), (t1, v1) = c[k][i], c[k][i + 1]
        return f"{(v1 - v0) / (t1 - t0):.0f}"
    (t0, p0, r0, _), (t1, p1, r1, x1) = cpu[i], cpu[i + 1]
    share = lambda d: f"{d / 100 / (t1 - t0) * 100:.0f} %"
    rc = share(x1) if name.startswith(("held", "synced")) else "–"
    print(f"| {name} | {mean:.2f} | {st.median(v):.2f} | {mean / base:.2f} | {rate_of('Binlog_commits') if 'Binlog_commits' in c else rate_of('Com_commit')} | {rate_of('Innodb_data_fsyncs')} | {share(p1 - p0)} | {share(r1 - r0)} | {rc} |")
EOF
say "written $OUT/floor.md"
