// Command copyform measures the two forms the copier could take, on a table
// with an integer primary key (the sysbench table), into empty copies of it:
//
//	insert-select  INSERT IGNORE INTO dst SELECT ... FROM src WHERE <range> LOCK IN SHARE MODE
//	               (recast's copier: the server moves the rows, nothing
//	               crosses the network)
//	read-write     BEGIN; SELECT ... WHERE <range> LOCK IN SHARE MODE; multi-row
//	               INSERT IGNORE of the rows read; COMMIT (the same locks, so
//	               equally correct, but the rows travel to the client and back
//	               while the locks are held)
//	mvcc-write     SELECT ... WHERE <range> (plain MVCC read, no lock); multi-row
//	               INSERT IGNORE. No row lock at all, but NOT correct on its own
//	               with a concurrent applier: a row deleted after the read and
//	               applied (deleted from the copy) before the insert comes
//	               back. Measured to know what the locks cost.
//
// Each form copies the whole table in chunks of -chunk rows with -threads
// workers, -repeat times, round-robin; it reports wall time, rows/s, this
// process's CPU time and the binlog bytes written. It is a measuring tool of
// bench/, not part of recast (bench/README.md).
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

func main() {
	host := flag.String("host", "127.0.0.1", "server host")
	port := flag.Int("port", 14306, "server port")
	user := flag.String("user", "recast", "user")
	pass := flag.String("password", "recast", "password")
	db := flag.String("database", "sbtest", "database")
	tbl := flag.String("table", "sbtest1", "source table (integer primary key `id`)")
	chunk := flag.Int("chunk", 5000, "rows per chunk")
	threadsFlag := flag.String("threads", "1,2", "worker counts to measure")
	forms := flag.String("forms", "insert-select,read-write,mvcc-write", "forms to measure")
	repeat := flag.Int("repeat", 3, "runs per form and worker count")
	flag.Parse()
	if err := run(*host, *port, *user, *pass, *db, *tbl, *chunk, *threadsFlag, *forms, *repeat); err != nil {
		fmt.Fprintln(os.Stderr, "copyform:", err)
		os.Exit(1)
	}
}

type result struct {
	form    string
	threads int
	wall    []float64
	cpu     []float64
	binlog  []float64 // MiB
	rows    int64
}

func run(host string, port int, user, pass, dbName, tbl string, chunk int, threadsFlag, forms string, repeat int) error {
	ctx := context.Background()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = user, pass, "tcp", fmt.Sprintf("%s:%d", host, port), dbName
	cfg.InterpolateParams = true
	cfg.Params = map[string]string{"tx_isolation": "'READ-COMMITTED'"}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(16)
	var lo, hi int64
	if err := db.QueryRowContext(ctx, "SELECT MIN(id), MAX(id) FROM "+tbl).Scan(&lo, &hi); err != nil {
		return err
	}
	var threads []int
	for _, s := range strings.Split(threadsFlag, ",") {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
			return fmt.Errorf("-threads: %q", s)
		}
		threads = append(threads, n)
	}
	res := map[string]*result{}
	var order []string
	for r := 0; r < repeat; r++ {
		for _, f := range strings.Split(forms, ",") {
			for _, n := range threads {
				key := fmt.Sprintf("%s/%d", f, n)
				if res[key] == nil {
					res[key] = &result{form: f, threads: n}
					order = append(order, key)
				}
				wall, cpu, mib, rows, err := once(ctx, db, tbl, f, n, chunk, lo, hi)
				if err != nil {
					return fmt.Errorf("%s: %w", key, err)
				}
				x := res[key]
				x.wall, x.cpu, x.binlog, x.rows = append(x.wall, wall), append(x.cpu, cpu), append(x.binlog, mib), rows
				fmt.Fprintf(os.Stderr, "run %d %-14s threads %d: %.2fs, %.0f rows/s, client CPU %.2fs, binlog %.0f MiB\n", r+1, f, n, wall, float64(rows)/wall, cpu, mib)
			}
		}
	}
	base := median(res[order[0]].wall)
	fmt.Printf("| form | threads | rows | wall s (median of %d) | rows/s | × %s | client CPU s | binlog MiB |\n|---|---:|---:|---:|---:|---:|---:|---:|\n", repeat, order[0])
	for _, k := range order {
		x := res[k]
		w := median(x.wall)
		fmt.Printf("| %s | %d | %d | %.2f (%s) | %.0f | %.2f | %.2f | %.0f |\n", x.form, x.threads, x.rows, w, list(x.wall), float64(x.rows)/w, w/base, median(x.cpu), median(x.binlog))
	}
	return nil
}

func once(ctx context.Context, db *sql.DB, tbl, form string, threads, chunk int, lo, hi int64) (wall, cpu, binlogMiB float64, rows int64, err error) {
	dst := "_copyform_dst"
	if _, err = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+dst); err != nil {
		return
	}
	if _, err = db.ExecContext(ctx, "CREATE TABLE "+dst+" LIKE "+tbl); err != nil {
		return
	}
	defer db.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+dst) //nolint:errcheck
	b0, err := binlogBytes(ctx, db)
	if err != nil {
		return
	}
	cpu0 := cpuSeconds()
	start := time.Now()
	var next atomic.Int64
	next.Store(lo)
	var copied atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, threads)
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				a := next.Add(int64(chunk)) - int64(chunk)
				if a > hi {
					return
				}
				n, err := copyChunk(ctx, db, tbl, dst, form, a, a+int64(chunk)-1)
				if err != nil {
					errs <- err
					return
				}
				copied.Add(n)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err = <-errs; err != nil {
		return
	}
	wall = time.Since(start).Seconds()
	cpu = cpuSeconds() - cpu0
	b1, err := binlogBytes(ctx, db)
	if err != nil {
		return
	}
	var n int64
	if err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+dst).Scan(&n); err != nil {
		return
	}
	if n != copied.Load() {
		err = fmt.Errorf("copied %d rows, the copy has %d", copied.Load(), n)
		return
	}
	return wall, cpu, float64(b1-b0) / (1 << 20), n, nil
}

const cols = "id, k, c, pad"

func copyChunk(ctx context.Context, db *sql.DB, src, dst, form string, a, b int64) (int64, error) {
	where := "id BETWEEN ? AND ?"
	switch form {
	case "insert-select":
		r, err := db.ExecContext(ctx, "INSERT IGNORE INTO "+dst+" ("+cols+") SELECT "+cols+" FROM "+src+" WHERE "+where+" LOCK IN SHARE MODE", a, b)
		if err != nil {
			return 0, err
		}
		return r.RowsAffected()
	case "read-write", "mvcc-write":
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return 0, err
		}
		defer tx.Rollback() //nolint:errcheck
		q := "SELECT " + cols + " FROM " + src + " WHERE " + where
		if form == "read-write" {
			q += " LOCK IN SHARE MODE"
		}
		rows, err := tx.QueryContext(ctx, q, a, b)
		if err != nil {
			return 0, err
		}
		args, n, err := readChunk(rows) // closes rows: the write below runs on the same transaction
		if err != nil {
			return 0, err
		}
		if form == "mvcc-write" { // the read ends here: no lock is held into the write
			if err := tx.Commit(); err != nil {
				return 0, err
			}
		}
		if n == 0 {
			return 0, nil
		}
		stmt := "INSERT IGNORE INTO " + dst + " (" + cols + ") VALUES " + strings.TrimSuffix(strings.Repeat("(?,?,?,?),", n), ",")
		var w interface {
			ExecContext(context.Context, string, ...any) (sql.Result, error)
		} = tx
		if form == "mvcc-write" {
			w = db
		}
		r, err := w.ExecContext(ctx, stmt, args...)
		if err != nil {
			return 0, err
		}
		if form == "read-write" {
			if err := tx.Commit(); err != nil {
				return 0, err
			}
		}
		return r.RowsAffected()
	}
	return 0, fmt.Errorf("unknown form %q", form)
}

func binlogBytes(ctx context.Context, db *sql.DB) (int64, error) {
	rows, err := db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, err
	}
	var total int64
	for rows.Next() {
		vals := make([]any, len(cols))
		var name string
		var size int64
		vals[0], vals[1] = &name, &size
		for i := 2; i < len(cols); i++ {
			vals[i] = new(sql.RawBytes)
		}
		if err := rows.Scan(vals...); err != nil {
			return 0, err
		}
		total += size
	}
	return total, rows.Err()
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func list(xs []float64) string {
	var p []string
	for _, x := range xs {
		p = append(p, fmt.Sprintf("%.2f", x))
	}
	return strings.Join(p, ", ")
}

// readChunk reads the rows of a chunk (id, k, c, pad) as the arguments of a
// multi-row INSERT, and closes rows.
func readChunk(rows *sql.Rows) (args []any, n int, err error) {
	defer rows.Close()
	for rows.Next() {
		var id, k int64
		var c, pad []byte
		if err := rows.Scan(&id, &k, &c, &pad); err != nil {
			return nil, 0, err
		}
		args = append(args, id, k, c, pad)
		n++
	}
	return args, n, rows.Err()
}
