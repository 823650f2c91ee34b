// Command recastbench is the measuring helper of bench/run.sh:
//
//	recastbench monitor  heartbeat replica-lag monitor (and Seconds_Behind_Master/_Source)
//	recastbench exec     run a command, record wall time, exit code and peak RSS
//	recastbench sbmean   mean tps of a sysbench --report-interval log
//	recastbench report   turn a bench output directory into RESULTS.md
//	recastbench cpu      machine CPU use, the bench's share and everyone else's
//	recastbench probe    recast's pacing probe, run from outside recast, each probe logged
//
// It is not part of recast; see bench/README.md.
package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

const usage = `usage:
  recastbench monitor --primary H:P --replica H:P [--user U --password P] [--flavor F] --out FILE
  recastbench exec --out FILE [--timeout D] -- COMMAND [ARGS...]
  recastbench sbmean [--skip N] SYSBENCH_LOG
  recastbench report --dir OUTDIR [--out FILE] [--keep-notes FILE] [--tsv FILE]
  recastbench cpu busy [--window 3s] | mark --pids P,... --out F | since --pids P,... --in F
  recastbench probe --addr H:P [--user U --password P] [--every 50ms] --out FILE
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "monitor":
		err = monitorCmd(os.Args[2:])
	case "exec":
		os.Exit(execCmd(os.Args[2:]))
	case "sbmean":
		err = sbmeanCmd(os.Args[2:])
	case "report":
		err = reportCmd(os.Args[2:])
	case "cpu":
		err = cpuCmd(os.Args[2:])
	case "probe":
		err = probeCmd(os.Args[2:])
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "recastbench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func nowMS() int64 { return time.Now().UnixMilli() }

// openDB opens a small pool to addr with UTC sessions and short timeouts.
func openDB(addr, user, password string) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = user, password
	cfg.Net, cfg.Addr = "tcp", addr
	cfg.Timeout = 3 * time.Second
	cfg.ReadTimeout = 10 * time.Second
	cfg.WriteTimeout = 10 * time.Second
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(2)
	return db, nil
}

// monitorCmd writes a heartbeat row on the primary every --interval and reads
// it on the replica every --interval: lag = NOW(6) on the replica minus the
// newest heartbeat it has applied (same host, same clock). It also samples
// Seconds_Behind_Master (MariaDB: SHOW SLAVE STATUS) or, with --flavor
// mysql-*, Seconds_Behind_Source (SHOW REPLICA STATUS; MySQL 8.4 removed
// SHOW SLAVE STATUS). Lines of --out:
//
//	hb  <unix ms> <lag ms>       heartbeat lag seen on the replica
//	sbm <unix ms> <seconds|NULL> Seconds_Behind_Master (or _Source)
//	hbw <unix ms> <ms>           a heartbeat write that took over 100 ms
//	err <unix ms> <message>
//
// It runs until SIGINT/SIGTERM.
func monitorCmd(args []string) error {
	fs := flag.NewFlagSet("monitor", flag.ContinueOnError)
	primary := fs.String("primary", "127.0.0.1:14306", "primary host:port")
	replica := fs.String("replica", "127.0.0.1:14307", "replica host:port")
	user := fs.String("user", "recast", "user")
	password := fs.String("password", "recast", "password")
	interval := fs.Duration("interval", 100*time.Millisecond, "heartbeat write and read period")
	sbmInterval := fs.Duration("sbm-interval", 500*time.Millisecond, "SHOW SLAVE STATUS (MySQL: SHOW REPLICA STATUS) period")
	table := fs.String("table", "bench_meta.heartbeat", "heartbeat table (id TINYINT PRIMARY KEY, ts DATETIME(6)); created if missing")
	out := fs.String("out", "", "output file (default stdout)")
	flavor := fs.String("flavor", "mariadb-10.11", "server flavor of the sandbox (mariadb-*, mysql-*): which replica status statement and upsert syntax to use")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mysqlFlavor := strings.HasPrefix(*flavor, "mysql-")
	w := io.Writer(os.Stdout)
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	var mu sync.Mutex
	emit := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, format+"\n", a...)
	}

	pdb, err := openDB(*primary, *user, *password)
	if err != nil {
		return err
	}
	defer pdb.Close()
	rdb, err := openDB(*replica, *user, *password)
	if err != nil {
		return err
	}
	defer rdb.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	schema, _, ok := strings.Cut(*table, ".")
	if !ok {
		return fmt.Errorf("--table %q: want schema.table", *table)
	}
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS " + schema,
		"CREATE TABLE IF NOT EXISTS " + *table + " (id TINYINT PRIMARY KEY, ts DATETIME(6) NOT NULL) ENGINE=InnoDB",
	} {
		if _, err := pdb.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("primary: %s: %w", q, err)
		}
	}

	var wg sync.WaitGroup
	every := func(d time.Duration, f func(context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(d)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					f(qctx)
					cancel()
				}
			}
		}()
	}
	upsert := "INSERT INTO " + *table + " (id, ts) VALUES (1, NOW(6)) ON DUPLICATE KEY UPDATE ts = VALUES(ts)"
	if mysqlFlavor {
		// VALUES() in ON DUPLICATE KEY UPDATE is deprecated on MySQL (warning 1287).
		upsert = "INSERT INTO " + *table + " (id, ts) VALUES (1, NOW(6)) AS hb ON DUPLICATE KEY UPDATE ts = hb.ts"
	}
	every(*interval, func(ctx context.Context) {
		t0 := time.Now()
		if _, err := pdb.ExecContext(ctx, upsert); err != nil {
			if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
				emit("err %d primary heartbeat: %s", nowMS(), oneLine(err))
			}
			return
		}
		if d := time.Since(t0); d > 100*time.Millisecond {
			emit("hbw %d %d", nowMS(), d.Milliseconds())
		}
	})
	read := "SELECT TIMESTAMPDIFF(MICROSECOND, ts, NOW(6)) FROM " + *table + " WHERE id = 1"
	every(*interval, func(ctx context.Context) {
		var us sql.NullInt64
		err := rdb.QueryRowContext(ctx, read).Scan(&us)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			// not replicated yet
		case err != nil:
			if ctx.Err() == nil {
				emit("err %d replica heartbeat: %s", nowMS(), oneLine(err))
			}
		case us.Valid:
			emit("hb %d %.1f", nowMS(), float64(us.Int64)/1000)
		}
	})
	every(*sbmInterval, func(ctx context.Context) {
		v, err := secondsBehindMaster(ctx, rdb, mysqlFlavor)
		if err != nil {
			if ctx.Err() == nil {
				emit("err %d replica status: %s", nowMS(), oneLine(err))
			}
			return
		}
		emit("sbm %d %s", nowMS(), v)
	})
	<-ctx.Done()
	wg.Wait()
	return nil
}

// secondsBehindMaster reads Seconds_Behind_Master from SHOW SLAVE STATUS on
// MariaDB, Seconds_Behind_Source from SHOW REPLICA STATUS on MySQL.
func secondsBehindMaster(ctx context.Context, db *sql.DB, mysqlFlavor bool) (string, error) {
	stmt, col := "SHOW SLAVE STATUS", "Seconds_Behind_Master"
	if mysqlFlavor {
		stmt, col = "SHOW REPLICA STATUS", "Seconds_Behind_Source"
	}
	rows, err := db.QueryContext(ctx, stmt)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return "", err
		}
		return "", errors.New("not a replica")
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return "", err
	}
	for i, c := range cols {
		if c == col {
			if vals[i] == nil {
				return "NULL", nil
			}
			return string(vals[i]), nil
		}
	}
	return "", errors.New("no " + col + " column")
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// execCmd runs a command with the caller's stdio, forwards SIGINT/SIGTERM,
// polls its VmRSS and writes key=value lines to --out: start_ms, end_ms,
// wall_s, exit_code, maxrss_kb (getrusage: the peak resident set, what VmHWM
// shows at exit), peak_vmrss_kb (polled), user_s, sys_s. It exits with the
// command's exit code (128+signal if it was killed).
func execCmd(args []string) int {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	out := fs.String("out", "", "key=value result file")
	poll := fs.Duration("poll", 100*time.Millisecond, "VmRSS poll period")
	timeout := fs.Duration("timeout", 0, "SIGTERM the command after this long (SIGKILL 30 s later); 0: never")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if len(argv) == 0 || *out == "" {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	// Not CommandContext: the child is stopped with SIGTERM (timeout, signal)
	// below so that it can clean up, never killed by a context.
	cmd := exec.Command(argv[0], argv[1:]...) //nolint:noctx // see above
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "recastbench exec: %v\n", err)
		if err := writeKV(*out, map[string]string{
			"start_ms": strconv.FormatInt(start.UnixMilli(), 10), "end_ms": strconv.FormatInt(start.UnixMilli(), 10),
			"wall_s": "0", "exit_code": "127", "error": oneLine(err),
		}); err != nil {
			fmt.Fprintf(os.Stderr, "recastbench exec: %v\n", err)
		}
		return 127
	}
	pid := cmd.Process.Pid
	done := make(chan struct{})
	var peak int64
	var timedOut atomic.Bool
	if *timeout > 0 {
		t := time.AfterFunc(*timeout, func() {
			timedOut.Store(true)
			fmt.Fprintf(os.Stderr, "recastbench exec: timed out after %s, sending SIGTERM\n", *timeout)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
		})
		defer t.Stop()
	}
	var pollWG sync.WaitGroup
	pollWG.Add(1)
	go func() {
		defer pollWG.Done()
		t := time.NewTicker(*poll)
		defer t.Stop()
		for {
			if kb, ok := vmRSS(pid); ok && kb > peak {
				peak = kb
			}
			select {
			case <-done:
				return
			case <-t.C:
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			}
		}
	}()
	_ = cmd.Wait()
	end := time.Now()
	close(done)
	pollWG.Wait()
	st := cmd.ProcessState
	code := st.ExitCode()
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	kv := map[string]string{
		"start_ms":      strconv.FormatInt(start.UnixMilli(), 10),
		"end_ms":        strconv.FormatInt(end.UnixMilli(), 10),
		"wall_s":        fmt.Sprintf("%.3f", end.Sub(start).Seconds()),
		"exit_code":     strconv.Itoa(code),
		"peak_vmrss_kb": strconv.FormatInt(peak, 10),
		"user_s":        fmt.Sprintf("%.2f", st.UserTime().Seconds()),
		"sys_s":         fmt.Sprintf("%.2f", st.SystemTime().Seconds()),
	}
	if timedOut.Load() {
		kv["timed_out"] = timeout.String()
	}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		kv["maxrss_kb"] = strconv.FormatInt(ru.Maxrss, 10) // KiB on Linux
	}
	if err := writeKV(*out, kv); err != nil {
		fmt.Fprintf(os.Stderr, "recastbench exec: %v\n", err)
	}
	return code
}

// vmRSS reads VmRSS (KiB) from /proc/pid/status.
func vmRSS(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, err := strconv.ParseInt(f[0], 10, 64)
				return v, err == nil
			}
		}
	}
	return 0, false
}

func writeKV(path string, kv map[string]string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	for _, k := range sortedKeys(kv) {
		fmt.Fprintf(bw, "%s=%s\n", k, kv[k])
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sbmeanCmd prints the mean tps of the per-second lines after --skip seconds.
func sbmeanCmd(args []string) error {
	fs := flag.NewFlagSet("sbmean", flag.ContinueOnError)
	skip := fs.Int("skip", 5, "ignore the first N seconds (warm-up)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("want one sysbench log")
	}
	sb, err := parseSysbench(fs.Arg(0))
	if err != nil {
		return err
	}
	var sum float64
	var n int
	for _, s := range sb.seconds {
		if s.sec > *skip {
			sum += s.tps
			n++
		}
	}
	if n == 0 {
		return errors.New("no per-second lines after the warm-up")
	}
	fmt.Printf("%.0f\n", sum/float64(n))
	return nil
}
