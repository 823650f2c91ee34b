// Command recastload runs a concurrent write load against a table, keeping
// an exact in-memory copy of what the table must contain, and verifies the
// table against it at the end. It is how the demo (and a person) checks that
// `recast migrate` loses no write while the application keeps writing.
//
//	recastload [connection flags] prepare --rows N [--drop-existing]
//	recastload [connection flags] run [--rows N] --writers 4 --rate 200 [--verify]
//
// run with --rows first creates and fills the table (the in-memory copy
// lives only in this process, so prepare and run must be one process for
// --verify to be meaningful); without --rows it reads the existing table as
// its starting point. run stops at SIGINT/SIGTERM (or after --duration),
// then, with --verify, compares the table with the in-memory copy.
//
// Exit status: 0 ok, 1 failure (a difference, a "table doesn't exist" error,
// or any error other than lock-wait timeouts and deadlocks), 2 usage.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/recast-osc/recast/internal/workload"
)

const usage = `usage: recastload [connection flags] prepare|run [flags]

  prepare  create the workload table and fill it with --rows rows
  run      run the write load until SIGINT/SIGTERM (or --duration); with
           --rows, create and fill the table first; with --verify, compare
           the table with the in-memory copy at the end

connection flags (may also follow the command):
`

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

type connFlags struct {
	host, user, password, database, table string
	port                                  int
	verbose                               bool
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.host, "host", c.host, "server `host`")
	fs.IntVar(&c.port, "port", c.port, "server `port`")
	fs.StringVar(&c.user, "user", c.user, "user `name`")
	fs.StringVar(&c.password, "password", c.password, "`password`")
	fs.StringVar(&c.database, "database", c.database, "`schema` of the table")
	fs.StringVar(&c.table, "table", c.table, "`table` name")
	fs.BoolVar(&c.verbose, "verbose", c.verbose, "log the writers' progress and errors in detail")
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

func realMain(args []string, stdout, stderr io.Writer) int {
	conn := connFlags{host: "127.0.0.1", port: 13306, user: "recast", password: "recast"}
	top := flag.NewFlagSet("recastload", flag.ContinueOnError)
	top.SetOutput(stderr)
	conn.register(top)
	top.Usage = func() {
		fmt.Fprint(top.Output(), usage)
		top.PrintDefaults()
	}
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if top.NArg() == 0 {
		top.Usage()
		return 2
	}
	cmd, rest := top.Arg(0), top.Args()[1:]

	fs := flag.NewFlagSet("recastload "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn.register(fs) // defaults: the values given before the command
	var (
		rows           = fs.Int("rows", 0, "create the table and insert `N` rows first (prepare: default 10000)")
		dropExisting   = fs.Bool("drop-existing", false, "drop the table first if it exists (with --rows)")
		seed           = fs.Int64("seed", time.Now().UnixNano(), "random `seed`")
		writers        = fs.Int("writers", 4, "concurrent writers (run)")
		rate           = fs.Int("rate", 200, "target total `ops/s` (run; 0 = as fast as possible)")
		duration       = fs.Duration("duration", 0, "stop after this long (run; 0 = at SIGINT/SIGTERM)")
		statusEvery    = fs.Duration("status-interval", 5*time.Second, "status line interval (run)")
		verify         = fs.Bool("verify", false, "verify the table against the in-memory copy at the end (run)")
		clientPrepared = fs.Bool("client-prepared", false, "send values inlined in the statement text instead of server-side prepared statements (run)")
		renames        multiFlag
		drops          multiFlag
	)
	fs.Var(&renames, "verify-rename", "`old=new`: column old of the workload is called new in the table now (repeatable)")
	fs.Var(&drops, "verify-drop", "`column` of the workload the table no longer has (repeatable)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: recastload [connection flags] %s [flags]\n\nflags:\n", cmd)
		fs.PrintDefaults()
	}
	switch cmd {
	case "prepare", "run":
	case "help", "-h", "--help":
		top.Usage()
		return 0
	default:
		fmt.Fprintf(stderr, "recastload: unknown command %q\n", cmd)
		top.Usage()
		return 2
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "recastload %s: unexpected argument %q\n", cmd, fs.Arg(0))
		return 2
	}
	if conn.database == "" || conn.table == "" {
		fmt.Fprintf(stderr, "recastload %s: --database and --table are required\n", cmd)
		return 2
	}
	if *writers < 1 || *rate < 0 {
		fmt.Fprintf(stderr, "recastload %s: --writers must be >= 1 and --rate >= 0\n", cmd)
		return 2
	}
	vopts := workload.VerifyOptions{Dropped: drops, Renamed: map[string]string{}, MaxExamples: 20}
	for _, r := range renames {
		from, to, ok := strings.Cut(r, "=")
		if !ok || from == "" || to == "" {
			fmt.Fprintf(stderr, "recastload %s: --verify-rename wants old=new, got %q\n", cmd, r)
			return 2
		}
		vopts.Renamed[from] = to
	}

	level := slog.LevelWarn
	if conn.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	// The first SIGINT/SIGTERM stops the load (and an unfinished prepare);
	// after it, the default handling is back, so a second one kills.
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	db, err := open(ctx, conn)
	if err != nil {
		fmt.Fprintf(stderr, "recastload: %v\n", err)
		return 1
	}
	defer db.Close()

	cfg := workload.Config{
		Schema: conn.database, Table: conn.table,
		Writers: *writers, Rows: *rows, OpsPerSec: *rate, Seed: *seed,
		Logger: log, ClientPrepared: *clientPrepared,
	}
	if cmd == "prepare" {
		if cfg.Rows <= 0 {
			cfg.Rows = 10000
		}
		if _, err := prepare(ctx, db, cfg, *dropExisting, stdout); err != nil {
			fmt.Fprintf(stderr, "recastload: %v\n", err)
			return 1
		}
		return 0
	}

	var sh *workload.Shadow
	if cfg.Rows > 0 {
		if sh, err = prepare(ctx, db, cfg, *dropExisting, stdout); err != nil {
			fmt.Fprintf(stderr, "recastload: %v\n", err)
			return 1
		}
	} else {
		start := time.Now()
		if sh, err = workload.Snapshot(ctx, db, conn.database, conn.table); err != nil {
			fmt.Fprintf(stderr, "recastload: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "prepared from the existing table: %d rows read in %s\n", sh.Len(), time.Since(start).Round(time.Millisecond))
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "recastload: interrupted")
		return 1
	}

	target := "as fast as possible"
	if cfg.OpsPerSec > 0 {
		target = fmt.Sprintf("target %d ops/s", cfg.OpsPerSec)
	}
	fmt.Fprintf(stdout, "running: %d writers on %s.%s, %s, seed %d; stop with SIGINT or SIGTERM\n", cfg.Writers, conn.database, conn.table, target, cfg.Seed)
	start := time.Now()
	load := workload.Start(ctx, db, cfg, sh)
	var deadline <-chan time.Time
	if *duration > 0 {
		deadline = time.After(*duration)
	}
	tick := time.NewTicker(*statusEvery)
	var prev workload.Stats
	prevAt := start
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-deadline:
			break loop
		case now := <-tick.C:
			st := load.Stats()
			rate := float64(st.Ops-prev.Ops) / now.Sub(prevAt).Seconds()
			fmt.Fprintf(stdout, "[%5.0fs] %.1f ops/s | %s\n", now.Sub(start).Seconds(), rate, st)
			prev, prevAt = st, now
		}
	}
	tick.Stop()
	stopSignals()
	st := load.Stop()
	elapsed := time.Since(start)
	fmt.Fprintf(stdout, "stopped after %s: %.1f ops/s | %s\n", elapsed.Round(100*time.Millisecond), float64(st.Ops)/elapsed.Seconds(), st)

	failed := st.Failed()
	var reasons []string
	if st.NoSuchTable > 0 {
		reasons = append(reasons, fmt.Sprintf("%d writes failed with 1146 (table doesn't exist)", st.NoSuchTable))
	}
	if st.OtherErrors > 0 {
		reasons = append(reasons, fmt.Sprintf("%d writes failed with unexpected errors (first: %s)", st.OtherErrors, st.FirstOtherError))
	}
	if *verify {
		vctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		vstart := time.Now()
		d, err := workload.Verify(vctx, db, conn.database, conn.table, sh, vopts)
		if err != nil {
			fmt.Fprintf(stderr, "recastload: %v\n", err)
			failed = true
			reasons = append(reasons, "verify failed: "+err.Error())
		} else {
			fmt.Fprintf(stdout, "verify: %s (%s)\n", d, time.Since(vstart).Round(time.Millisecond))
			for _, ex := range d.Examples {
				fmt.Fprintf(stdout, "  %s\n", ex)
			}
			if !d.OK() {
				failed = true
				reasons = append(reasons, fmt.Sprintf("table differs from the expected content (%d missing, %d extra, %d different)", d.Missing, d.Extra, d.Different))
			}
		}
	}
	fmt.Fprintf(stdout, "summary: committed %d ops, lock-wait timeouts %d, deadlocks %d, 1146 errors %d, other errors %d",
		st.Committed, st.LockTimeouts, st.Deadlocks, st.NoSuchTable, st.OtherErrors)
	if *verify {
		fmt.Fprintf(stdout, ", %d rows expected", sh.Len())
	}
	fmt.Fprintln(stdout)
	if failed {
		fmt.Fprintf(stdout, "RESULT: FAILED: %s\n", strings.Join(reasons, "; "))
		return 1
	}
	if *verify {
		fmt.Fprintln(stdout, "RESULT: OK (table verified)")
	} else {
		fmt.Fprintln(stdout, "RESULT: OK (not verified)")
	}
	return 0
}

func open(ctx context.Context, c connFlags) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = c.user, c.password
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort(c.host, strconv.Itoa(c.port))
	cfg.DBName = c.database
	cfg.Timeout = 10 * time.Second
	cfg.Collation = "utf8mb4_general_ci"
	// The writers choose server-side prepared statements or inlined values
	// themselves (workload.Config.ClientPrepared); this only affects
	// recastload's own statements.
	cfg.InterpolateParams = true
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxIdleConns(8)
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect to %s as %s: %w", cfg.Addr, c.user, err)
	}
	return db, nil
}

func prepare(ctx context.Context, db *sql.DB, cfg workload.Config, dropExisting bool, stdout io.Writer) (*workload.Shadow, error) {
	if dropExisting {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+quoteIdent(cfg.Schema)+"."+quoteIdent(cfg.Table)); err != nil {
			return nil, err
		}
	}
	if err := workload.CreateTable(ctx, db, cfg); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1050 {
			return nil, fmt.Errorf("%w (use --drop-existing to replace it)", err)
		}
		return nil, err
	}
	start := time.Now()
	sh, err := workload.Prepare(ctx, db, cfg)
	if err != nil {
		return nil, err
	}
	el := time.Since(start)
	fmt.Fprintf(stdout, "prepared %d rows in %s (%.0f rows/s)\n", sh.Len(), el.Round(time.Millisecond), float64(sh.Len())/el.Seconds())
	return sh, nil
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
