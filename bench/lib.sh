# bench/lib.sh: sourced by bench/floor.sh, bench/mechanism.sh and bench/ab.sh (bench/run.sh has
# its own, richer set-up): the sandbox's servers set up as bench/run.sh's are,
# and sysbench's per-second p99.

# sql PORT ARGS...: the mariadb client as the sandbox's recast user.
sql() { local p=$1; shift; mariadb -h127.0.0.1 -P"$p" -urecast -precast "$@"; }

# bench_servers PORT FLAVOR: a 1 GiB buffer pool on the primary (PORT) and
# the replica (PORT+1), the replica applying serially.
bench_servers() {
	local port=$1 flavor=$2 p
	for p in "$port" $((port + 1)); do sql "$p" -e "SET GLOBAL innodb_buffer_pool_size = 1073741824"; done
	if [[ $flavor == mysql-* ]]; then
		sql $((port + 1)) -e "STOP REPLICA; SET GLOBAL replica_parallel_workers = 1; START REPLICA"
	else
		sql $((port + 1)) -e "STOP SLAVE; SET GLOBAL slave_parallel_threads = 0; START SLAVE"
	fi
}

# bench_start NAME PORT FLAVOR: OUT (bench/out/NAME-<timestamp>), a recast
# built into OUT/bin/recast (RECAST), and a sandbox with one replica in
# SB_DIR (.sandbox/NAME) on PORT; say logs to OUT/NAME.log. The caller
# removes the sandbox (trap).
bench_start() {
	OUT=bench/out/$1-$(date -u +%Y%m%d-%H%M%S)
	SB_DIR=.sandbox/$1
	BENCH_NAME=$1
	mkdir -p "$OUT/bin"
	RECAST=$OUT/bin/recast
	go build -o "$RECAST" ./cmd/recast
	"$RECAST" sandbox up --dir "$SB_DIR" --port "$2" --replicas 1 --flavor "$3" --quiet >"$OUT/sandbox.txt"
}
say() { printf '[%s] %s\n' "$(date -u +%T)" "$*" | tee -a "$OUT/$BENCH_NAME.log" >&2; }

# sandbox_pids DIR: "PRIMARY_PID REPLICA_PID" of the sandbox in DIR.
sandbox_pids() {
	python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["sandbox"]; print(s["primary"]["pid"], s["replicas"][0]["pid"])' "$1/sandbox.json"
}

# ticks PID: the process's CPU time (user + system) in clock ticks, 0 once gone.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# sb_opts PORT ROWS: sets SB, sysbench's options for the sandbox's sbtest1.
sb_opts() {
	# shellcheck disable=SC2034 # SB is for the caller
	SB=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$1" --mysql-user=recast --mysql-password=recast
		--mysql-db=sbtest --tables=1 --table-size="$2")
}

# p99_series SYSBENCH_LOG: "second p99_ms" per line from a --report-interval=1 log.
p99_series() {
	grep -oE '^\[ *[0-9]+s \].*lat \(ms,99%\): [0-9.]+' "$1" | sed -E 's/^\[ *([0-9]+)s \].*: ([0-9.]+)$/\1 \2/'
}
