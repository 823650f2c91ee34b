// Package testutil gives a package's tests one shared throwaway MariaDB
// sandbox (primary plus replicas), started from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testutil.Main(m, 1)) }
//
// Each test binary gets its own sandbox in a fresh temp dir on free ports, so
// packages may run in parallel. Tests isolate themselves with NewSchema.
//
// Environment:
//
//	RECAST_TEST_KEEP=1  keep the sandbox after the run and print its dir
//	                    (stop it with `recast sandbox down --dir DIR`)
//	RECAST_TEST_LOG=1   log the sandbox's progress to stderr
//	RECAST_TEST_FLAVOR  the server flavor, one of sandbox.Flavors (default
//	                    mariadb-10.11, the installed MariaDB); fetched
//	                    flavors missing from the cache are fetched first, and
//	                    when that fails every test of the binary fails
//
// With -short (go test -short) no sandbox is started: only the tests that
// need no server run, and those that call Sandbox (or NewSchema, DB, ...)
// are skipped.
//
// Sandboxes of test binaries that died without cleaning up (e.g. killed by
// go test's -timeout) are stopped and removed by the next Main.
package testutil

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/recast-osc/recast/internal/flavor"
	"github.com/recast-osc/recast/internal/sandbox"
)

const (
	dirPrefix  = "recast-test-"
	ownerFile  = "owner.pid"
	keepFile   = "keep"
	sandboxSub = "sb"

	waitReplicaTimeout = 60 * time.Second
)

var (
	current   *sandbox.Sandbox
	server    flavor.Server // the primary's flavor and version
	primaryDB *sql.DB       // admin connection to the primary, no schema
	replicaDB []*sql.DB     // admin connections to the replicas
	schemaSeq atomic.Int64
)

// Main starts a Fast sandbox with the given number of replicas, runs the
// tests, stops the sandbox and removes its dir. It returns the exit code for
// os.Exit.
func Main(m *testing.M, replicas int) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		return m.Run()
	}
	level := slog.LevelWarn
	if v := os.Getenv("RECAST_TEST_LOG"); v == "1" {
		level = slog.LevelInfo
	} else if v != "" {
		_ = level.UnmarshalText([]byte(v)) // debug, info, warn, error
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	keep := os.Getenv("RECAST_TEST_KEEP") == "1"

	reapStale(log)

	root, err := os.MkdirTemp("", dirPrefix+"*")
	if err != nil {
		fmt.Fprintf(os.Stderr, "testutil: %v\n", err)
		return 1
	}
	if err := os.WriteFile(filepath.Join(root, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "testutil: %v\n", err)
		os.RemoveAll(root)
		return 1
	}
	dir := filepath.Join(root, sandboxSub)

	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := sandbox.Down(ctx, dir); err != nil {
				fmt.Fprintf(os.Stderr, "testutil: stop sandbox: %v\n", err)
				return
			}
			os.RemoveAll(root)
		})
	}
	// Interrupted runs (Ctrl-C reaches the test binary; the servers are in
	// their own process groups) still clean up.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer func() {
		signal.Stop(sigs)
		close(sigs) // ends the goroutine below (nothing is sent after Stop)
	}()
	go func() {
		if sig, ok := <-sigs; ok {
			fmt.Fprintf(os.Stderr, "testutil: %v: stopping sandbox\n", sig)
			if !keep {
				stop()
			}
			os.Exit(1)
		}
	}()

	flv := Flavor()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	sb, err := startSandbox(ctx, dir, replicas, flv, log)
	cancel()
	if err != nil {
		// Loud: a flavor that cannot be fetched or started fails the run.
		fmt.Fprintf(os.Stderr, "testutil: FAIL: cannot start a %s sandbox (RECAST_TEST_FLAVOR=%s): %v\n", flv, flv, err)
		fmt.Printf("FAIL\ttestutil: no %s sandbox: %s\n", flv, strings.SplitN(err.Error(), "\n", 2)[0])
		stop()
		return 1
	}
	if err := openAdmin(sb); err != nil {
		fmt.Fprintf(os.Stderr, "testutil: %v\n", err)
		closeAdmin()
		stop()
		return 1
	}
	current = sb

	code := m.Run()

	closeAdmin()
	if keep {
		if err := os.WriteFile(filepath.Join(root, keepFile), nil, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "testutil: mark the sandbox kept: %v\n", err)
		}
		fmt.Fprintf(os.Stderr, "testutil: RECAST_TEST_KEEP=1: keeping sandbox in %s (primary %s, user %s/%s); stop it with: recast sandbox down --dir %s\n",
			dir, sb.Primary.Addr(), sb.User, sb.Password, dir)
		return code
	}
	stop()
	return code
}

// startSandbox runs sandbox.Up on free ports, retrying when another process
// grabs a port in between.
func startSandbox(ctx context.Context, dir string, replicas int, flv string, log *slog.Logger, serverArgs ...string) (*sandbox.Sandbox, error) {
	var lastErr error
	for range 10 {
		port, err := freePorts(replicas + 1)
		if err != nil {
			return nil, err
		}
		sb, err := sandbox.Up(ctx, sandbox.Config{Dir: dir, Port: port, Replicas: replicas, Fast: true, Flavor: flv, Logger: log, ServerArgs: serverArgs})
		if err == nil {
			return sb, nil
		}
		if !errors.Is(err, sandbox.ErrPortInUse) {
			return nil, err
		}
		log.Warn("port collision, retrying", "err", err)
		lastErr = err
	}
	return nil, lastErr
}

// freePorts finds n consecutive ports on 127.0.0.1 that are free now.
func freePorts(n int) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		base := l.Addr().(*net.TCPAddr).Port
		ok := base+n-1 <= 65535
		for p := base + 1; ok && p < base+n; p++ {
			l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				ok = false
				break
			}
			l2.Close()
		}
		l.Close()
		if ok {
			return base, nil
		}
	}
	return 0, fmt.Errorf("testutil: found no %d consecutive free ports", n)
}

// reapStale stops and removes sandboxes left by test binaries that are gone.
func reapStale(log *slog.Logger) {
	roots, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, root := range roots {
		b, err := os.ReadFile(filepath.Join(root, ownerFile))
		if err != nil {
			continue // being created, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || processExists(pid) {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, sandboxSub)); errors.Is(err, fs.ErrNotExist) {
			os.RemoveAll(root) // a kept sandbox someone has stopped since
			continue
		}
		if _, err := os.Stat(filepath.Join(root, keepFile)); err == nil {
			continue
		}
		log.Warn("removing sandbox of a dead test binary", "dir", root, "pid", pid)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = sandbox.Down(ctx, filepath.Join(root, sandboxSub))
		cancel()
		if err == nil {
			os.RemoveAll(root)
		}
	}
}

func processExists(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

func openDB(dsn string, params map[string]string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if len(params) > 0 {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		for k, v := range params {
			cfg.Params[k] = v
		}
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

func openAdmin(sb *sandbox.Sandbox) error {
	var err error
	if primaryDB, err = openDB(sb.DSN(sb.Primary, ""), nil); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if server, err = flavor.Detect(ctx, primaryDB); err != nil {
		return err
	}
	for _, r := range sb.Replicas {
		db, err := openDB(sb.DSN(r, ""), nil)
		if err != nil {
			return err
		}
		replicaDB = append(replicaDB, db)
	}
	return nil
}

func closeAdmin() {
	if primaryDB != nil {
		primaryDB.Close()
	}
	for _, db := range replicaDB {
		db.Close()
	}
}

// Flavor is the server flavor tests run on: RECAST_TEST_FLAVOR, or
// sandbox.DefaultFlavor.
func Flavor() string {
	if f := os.Getenv("RECAST_TEST_FLAVOR"); f != "" {
		return f
	}
	return sandbox.DefaultFlavor
}

// Server is the flavor and version of the sandbox's primary.
func Server(t testing.TB) flavor.Server {
	t.Helper()
	Sandbox(t)
	return server
}

// ExtraSandbox starts a sandbox of its own for t (Flavor(), with these
// extra server options, e.g. TLS certificates) and stops it when t ends.
// Under -short it skips t.
func ExtraSandbox(t testing.TB, replicas int, serverArgs ...string) *sandbox.Sandbox {
	t.Helper()
	if testing.Short() {
		t.Skip("testutil: needs a sandbox, not started under -short")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := startSandbox(ctx, filepath.Join(dir, "sb"), replicas, Flavor(), slog.New(slog.DiscardHandler), serverArgs...)
	if err != nil {
		t.Fatalf("testutil: start a sandbox with %v: %v", serverArgs, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := sandbox.Down(ctx, sb.Dir); err != nil {
			t.Errorf("testutil: stop the extra sandbox: %v", err)
		}
	})
	return sb
}

// Sandbox returns the sandbox started by Main.
func Sandbox(t testing.TB) *sandbox.Sandbox {
	t.Helper()
	if current == nil {
		if testing.Short() {
			t.Skip("testutil: needs a MariaDB sandbox, not started under -short")
		}
		t.Fatal("testutil: no sandbox; call testutil.Main from TestMain: func TestMain(m *testing.M) { os.Exit(testutil.Main(m, 1)) }")
	}
	return current
}

// NewSchema creates a schema named after the test (lower-cased, sanitised,
// at most 64 characters, with a unique suffix) and drops it when the test
// ends.
func NewSchema(t testing.TB) string {
	t.Helper()
	Sandbox(t)
	name := schemaName(t.Name(), schemaSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := primaryDB.ExecContext(ctx, "CREATE DATABASE "+QuoteIdent(name)); err != nil {
		t.Fatalf("testutil: create schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := primaryDB.ExecContext(ctx, "DROP DATABASE IF EXISTS "+QuoteIdent(name)); err != nil {
			t.Errorf("testutil: drop schema %s: %v", name, err)
		}
	})
	if server.MySQL() {
		for _, r := range seqRanges {
			if _, err := primaryDB.ExecContext(ctx, seqView(name, r[0], r[1])); err != nil {
				t.Fatalf("testutil: create seq_%d_to_%d in %s: %v", r[0], r[1], name, err)
			}
		}
	}
	return name
}

// seqRanges are the seq_FROM_TO tables of MariaDB's Sequence engine that the
// tests use; on MySQL NewSchema creates views of the same name and content
// (one column seq, ascending).
var seqRanges = [][2]int{{0, 6}, {1, 10}, {1, 100}, {1, 500}, {1, 1000}, {1, 2000}, {1, 3000}, {1, 5000}, {1, 10000}, {1, 20000}, {1, 100000}}

func seqView(schema string, from, to int) string {
	digit := "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	var from_, expr []string
	for i, mul := 0, 1; mul <= max(to, 1); i, mul = i+1, mul*10 {
		from_ = append(from_, fmt.Sprintf("%s d%d", digit, i))
		expr = append(expr, fmt.Sprintf("d%d.d*%d", i, mul))
	}
	v := strings.Join(expr, "+")
	name := QuoteIdent(fmt.Sprintf("seq_%d_to_%d", from, to))
	if schema != "" {
		name = QuoteIdent(schema) + "." + name
	}
	return fmt.Sprintf("CREATE VIEW %s AS SELECT CAST(%s AS UNSIGNED) AS seq FROM %s WHERE %s BETWEEN %d AND %d ORDER BY seq",
		name, v, strings.Join(from_, " CROSS JOIN "), v, from, to)
}

func schemaName(testName string, seq int64) string {
	var b strings.Builder
	underscore := false
	for _, r := range strings.ToLower(testName) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			underscore = false
		} else if !underscore {
			b.WriteByte('_')
			underscore = true
		}
	}
	base := strings.Trim(b.String(), "_")
	if base == "" {
		base = "t"
	}
	var rnd [2]byte
	rand.Read(rnd[:])
	suffix := fmt.Sprintf("_%d_%s", seq, hex.EncodeToString(rnd[:]))
	if maxLen := 64 - len(suffix); len(base) > maxLen {
		base = strings.TrimRight(base[:maxLen], "_")
	}
	return base + suffix
}

// QuoteIdent quotes a MariaDB identifier with backticks.
func QuoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// DB opens a *sql.DB on the primary for schema (as the sandbox user, session
// time_zone '+00:00'), closed when the test ends.
func DB(t testing.TB, schema string) *sql.DB {
	t.Helper()
	sb := Sandbox(t)
	return open(t, sb, sb.Primary, schema)
}

// ReplicaDB is DB for replica i (0-based index into Sandbox().Replicas).
func ReplicaDB(t testing.TB, i int, schema string) *sql.DB {
	t.Helper()
	sb := Sandbox(t)
	if i < 0 || i >= len(sb.Replicas) {
		t.Fatalf("testutil: replica %d requested, sandbox has %d (index is 0-based; pass the count to testutil.Main)", i, len(sb.Replicas))
	}
	return open(t, sb, sb.Replicas[i], schema)
}

func open(t testing.TB, sb *sandbox.Sandbox, inst sandbox.Instance, schema string) *sql.DB {
	t.Helper()
	params := map[string]string{"time_zone": "'+00:00'"}
	if server.MySQL() {
		// MariaDB's default sql_mode, so that the tests' data (zero dates)
		// is accepted alike; recast's own sessions set their own.
		params["sql_mode"] = "'STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'"
		// Live information_schema.TABLES statistics (AUTO_INCREMENT).
		params["information_schema_stats_expiry"] = "0"
	}
	db, err := openDB(sb.DSN(inst, schema), params)
	if err != nil {
		t.Fatalf("testutil: open %s: %v", inst.Name, err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("testutil: connect to %s schema %q: %v", inst.Name, schema, err)
	}
	return db
}

// Exec runs each statement in turn and fails the test on the first error.
func Exec(t testing.TB, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if server.MySQL() {
			mysqlSeqViews(t, db, s)
		}
		if _, err := db.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("testutil: exec %q: %v", s, err)
		}
	}
}

var seqName = regexp.MustCompile(`\b(?:(\w+)\.)?seq_(\d+)_to_(\d+)\b`)

var seqCreated sync.Map // "db pointer/schema.name" of views mysqlSeqViews created

// mysqlSeqViews creates the seq_FROM_TO views stmt uses that NewSchema did
// not create (sizes computed by a test, schemas made without NewSchema): in
// the schema that qualifies the name, else in db's current schema.
func mysqlSeqViews(t testing.TB, db *sql.DB, stmt string) {
	t.Helper()
	for _, m := range seqName.FindAllStringSubmatch(stmt, -1) {
		schema := m[1]
		from, _ := strconv.Atoi(m[2])
		to, _ := strconv.Atoi(m[3])
		if schema == "" && slices.Contains(seqRanges, [2]int{from, to}) {
			continue
		}
		if _, done := seqCreated.LoadOrStore(fmt.Sprintf("%p/%s", db, m[0]), true); done {
			continue
		}
		v := strings.Replace(seqView(schema, from, to), "CREATE VIEW ", "CREATE OR REPLACE VIEW ", 1)
		if _, err := db.ExecContext(context.Background(), v); err != nil {
			t.Fatalf("testutil: create %s: %v", m[0], err)
		}
	}
}

// WaitReplicaCaughtUp waits (at most 60 s) until replica i (0-based) has
// applied every transaction the primary has binlogged so far. It fails fast
// if the replica's SQL thread has stopped.
func WaitReplicaCaughtUp(t testing.TB, i int) {
	t.Helper()
	sb := Sandbox(t)
	if i < 0 || i >= len(sb.Replicas) {
		t.Fatalf("testutil: replica %d requested, sandbox has %d", i, len(sb.Replicas))
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitReplicaTimeout)
	defer cancel()
	var pos string
	if err := primaryDB.QueryRowContext(ctx, server.GTIDExecutedQuery()).Scan(&pos); err != nil {
		t.Fatalf("testutil: read primary GTID position: %v", err)
	}
	rdb := replicaDB[i]
	for {
		var res sql.NullInt64
		err := rdb.QueryRowContext(ctx, server.WaitGTIDQuery(), pos, 1).Scan(&res)
		if err == nil && res.Valid && res.Int64 == 0 {
			return
		}
		rs, serr := sandbox.ReplicaStatus(ctx, rdb)
		if serr == nil && rs.SQLRunning == "No" {
			t.Fatalf("testutil: replica %d stopped applying (IO %s %q, SQL %s %q) while waiting for %s",
				i, rs.IORunning, rs.LastIOError, rs.SQLRunning, rs.LastSQLError, pos)
		}
		if ctx.Err() != nil {
			var status string
			if rs != nil {
				status = fmt.Sprintf("IO %s %q, SQL %s %q, Gtid_IO_Pos %s", rs.IORunning, rs.LastIOError, rs.SQLRunning, rs.LastSQLError, rs.GTIDIOPos)
			}
			t.Fatalf("testutil: replica %d not caught up with %s after %s (last: %v, %s)", i, pos, waitReplicaTimeout, err, status)
		}
	}
}

// TableChecksum returns a digest of all rows of schema.table, read in
// orderBy order (an ORDER BY expression list; "" means the primary key, or
// all columns when there is none). Only the values count (NULL differs from
// the empty string), not the column names or types, so a table and its copy
// compare equal when their visible columns hold the same values. The result
// has the form "rows=N sha256=HEX".
func TableChecksum(t testing.TB, db *sql.DB, schema, table string, orderBy string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if orderBy == "" {
		var err error
		if orderBy, err = defaultOrder(ctx, db, schema, table); err != nil {
			t.Fatalf("testutil: checksum %s.%s: %v", schema, table, err)
		}
	}
	q := fmt.Sprintf("SELECT * FROM %s.%s ORDER BY %s", QuoteIdent(schema), QuoteIdent(table), orderBy)
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		t.Fatalf("testutil: checksum: %s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatalf("testutil: checksum: %v", err)
	}
	h := sha256.New()
	var buf [binary.MaxVarintLen64 + 1]byte
	h.Write(binary.AppendUvarint(buf[:0], uint64(len(cols))))
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("testutil: checksum: %v", err)
		}
		for _, v := range vals {
			if v == nil {
				h.Write([]byte{0})
				continue
			}
			b := append(buf[:0], 1)
			h.Write(binary.AppendUvarint(b, uint64(len(v))))
			h.Write(v)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("testutil: checksum: %v", err)
	}
	return fmt.Sprintf("rows=%d sha256=%x", n, h.Sum(nil))
}

func defaultOrder(ctx context.Context, db *sql.DB, schema, table string) (string, error) {
	rows, err := db.QueryContext(ctx, `SELECT COLUMN_NAME FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX`, schema, table)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return "", err
		}
		cols = append(cols, QuoteIdent(c))
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if len(cols) > 0 {
		return strings.Join(cols, ", "), nil
	}
	// No primary key: order by every column SELECT * returns.
	all, err := columnNames(ctx, db, schema, table)
	if err != nil {
		return "", err
	}
	n := len(all)
	if n == 0 {
		return "", fmt.Errorf("table %s.%s not found", schema, table)
	}
	pos := make([]string, n)
	for i := range pos {
		pos[i] = strconv.Itoa(i + 1)
	}
	return strings.Join(pos, ", "), nil
}

// columnNames returns the columns SELECT * returns for schema.table.
func columnNames(ctx context.Context, db *sql.DB, schema, table string) ([]string, error) {
	r, err := db.QueryContext(ctx, fmt.Sprintf("SELECT * FROM %s.%s LIMIT 0", QuoteIdent(schema), QuoteIdent(table)))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cols, err := r.Columns()
	if err != nil {
		return nil, err
	}
	return cols, r.Err()
}
