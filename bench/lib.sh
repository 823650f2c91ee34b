# bench/lib.sh: sourced by bench/floor.sh and bench/ab.sh (bench/run.sh has
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

# p99_series SYSBENCH_LOG: "second p99_ms" per line from a --report-interval=1 log.
p99_series() {
	grep -oE '^\[ *[0-9]+s \].*lat \(ms,99%\): [0-9.]+' "$1" | sed -E 's/^\[ *([0-9]+)s \].*: ([0-9.]+)$/\1 \2/'
}
