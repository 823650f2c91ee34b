// Command recast changes the schema of a live MariaDB/MySQL table without
// blocking it: see README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/recast-osc/recast/internal/check"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/migration"
)

const usage = `recast: online schema change for MariaDB and MySQL

usage:
  recast migrate --host H --port P --user U --password PW --database D --table T --alter "..." [--execute]
  recast cleanup --host H --port P --user U --password PW --database D --table T
  recast sandbox up|down|status [--dir DIR] [--port 13306] [--replicas 1]
  recast ctl --http HOST:PORT status|pause|resume|set k=v|cutover|abort

Run "recast <command> -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "migrate":
		return migrateCmd(ctx, args[1:], stdout, stderr)
	case "cleanup":
		return cleanupCmd(ctx, args[1:], stdout, stderr)
	case "sandbox":
		return sandboxCmd(ctx, args[1:], stdout, stderr)
	case "ctl":
		return ctlCmd(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "recast: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// connFlags registers the connection flags shared by the commands.
func connFlags(fs *flag.FlagSet, c *dbconn.Config, database, tbl *string) {
	fs.StringVar(&c.Host, "host", "127.0.0.1", "server host")
	fs.IntVar(&c.Port, "port", 3306, "server port")
	fs.StringVar(&c.User, "user", "root", "user")
	fs.StringVar(&c.Password, "password", "", "password (or set RECAST_PASSWORD)")
	fs.StringVar(database, "database", "", "database (schema) of the table")
	fs.StringVar(tbl, "table", "", "table to change")
}

func newLogger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := migration.DefaultOptions()
	fs := flag.NewFlagSet("recast migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	connFlags(fs, &o.Conn, &o.Database, &o.Table)
	fs.StringVar(&o.Alter, "alter", "", `the ALTER TABLE body, e.g. "ADD COLUMN c INT, ADD INDEX (c)"`)
	fs.BoolVar(&o.Execute, "execute", false, "run the migration (without it: dry run, print the plan)")
	fs.BoolVar(&o.DropOldTable, "drop-old-table", false, "drop the original table after the cut-over instead of keeping it as _T_old")
	fs.BoolVar(&o.ExperimentalMySQL, "experimental-mysql", false, "migrate on MySQL despite its known differences (testing only; see README, Supported servers)")
	fs.BoolVar(&o.Resume, "resume", false, "continue an interrupted migration from its checkpoint (same --alter)")
	fs.DurationVar(&o.CheckpointInterval, "checkpoint-interval", o.CheckpointInterval, "how often progress is saved for --resume")
	fs.BoolVar(&o.Checksum, "checksum", o.Checksum, "compare old and new table before the cut-over (--checksum=false skips it)")
	fs.IntVar(&o.ApplyThreads, "apply-threads", o.ApplyThreads, "parallel binlog applier connections")
	fs.IntVar(&o.Threads, "threads", o.Threads, "copy chunks in flight at once")
	fs.DurationVar(&o.ChunkTime, "chunk-time", o.ChunkTime, "target duration of one copy chunk")
	fs.IntVar(&o.MaxChunkRows, "max-chunk-rows", o.MaxChunkRows, "most rows one copy chunk may lock")
	fs.DurationVar(&o.CutOverLockTimeout, "cut-over-lock-timeout", o.CutOverLockTimeout, "longest the application waits per cut-over attempt")
	fs.IntVar(&o.CutOverAttempts, "cut-over-retries", o.CutOverAttempts, "cut-over attempts before giving up")
	fs.DurationVar(&o.CutOverBudget, "cut-over-budget", o.CutOverBudget, "longest the cut-over may take, waiting for metadata-lock blockers included, before giving up (table unchanged)")
	fs.StringVar(&o.Method, "method", o.Method, "auto (INSTANT/NOCOPY ALTER when the server can, else copy), copy, or instant (fail unless INSTANT works)")
	fs.DurationVar(&o.KillBlockersAfter, "kill-blockers-after", 0, "kill queries/idle transactions that have blocked the cut-over's metadata lock this long (0: never)")
	fs.Int64Var(&o.KillMaxRows, "kill-max-rows", o.KillMaxRows, "never kill a blocking transaction that modified more rows than this")
	fs.BoolVar(&o.LoadMDLPlugin, "load-mdl-plugin", false, "INSTALL SONAME 'metadata_lock_info' if it is not loaded (exact blocker detection)")
	fs.StringVar(&o.PostponeCutOverFlagFile, "postpone-cut-over-flag-file", "", "while this file exists (created if missing), keep the new table in sync and do not cut over")
	fs.DurationVar(&o.ProgressInterval, "progress-interval", o.ProgressInterval, "how often to print progress (0: never)")
	serverID := fs.Uint("server-id", 0, "replica server id for recast's binlog connection (default: random)")
	setVars := fs.String("set-vars", "", `session variables for recast's own connections, "name=value,name='x y'" (e.g. binlog_format=ROW)`)
	verbose := fs.Bool("verbose", false, "debug logging")
	ctlFlags := addControlFlags(fs, &o) // ctl.go: throttling, --http, --serve-socket-file
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "recast migrate: unexpected argument %q (quote the --alter text)\n", fs.Arg(0))
		return 2
	}
	if o.Conn.Password == "" {
		o.Conn.Password = os.Getenv("RECAST_PASSWORD")
	}
	vars, err := check.ParseSetVars(*setVars)
	if err != nil {
		fmt.Fprintf(stderr, "recast migrate: %v\n", err)
		return 2
	}
	o.Conn.SetVars = vars
	if err := ctlFlags.apply(&o); err != nil {
		fmt.Fprintf(stderr, "recast migrate: %v\n", err)
		return 2
	}
	o.ServerID = uint32(*serverID)
	errw := progressWriter(stderr) // a progress bar on a terminal
	o.Logger = newLogger(errw, *verbose)
	o.Pause = faultPause(stderr)
	o.Progress = errw

	ctl, stopCtl, err := ctlFlags.start(o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "recast migrate: %v\n", err)
		return 2
	}
	defer stopCtl()
	res, err := ctl.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "recast: %s\n", flatError(err))
		return 1
	}
	if !res.Executed {
		fmt.Fprintf(stdout, "dry run: nothing was changed; add --execute to run\n%s", res.Plan.Describe())
		return 0
	}
	if res.Plan == nil { // --resume of a run killed after its swap
		fmt.Fprintf(stdout, "the interrupted run had already swapped the tables; its clean-up is done (old table: %s)\n", orDropped(res.CutOver.OldTable))
		return 0
	}
	if res.Plan.Method != migration.MethodCopy {
		fmt.Fprintf(stdout, "altered %s in %s with ALGORITHM=%s (no copy): %d attempt(s), table locked %s\n",
			res.Plan.Source.QuotedName(), res.Duration.Round(time.Millisecond), strings.ToUpper(res.Plan.Method),
			res.CutOver.Attempts, res.CutOver.LockedFor.Round(time.Millisecond))
		return 0
	}
	fmt.Fprintf(stdout, "migrated %s in %s: %d rows copied, %d binlog row changes applied (%d rows written), cut-over took %d attempt(s), table locked %s, application statements blocked %s over all attempts; old table: %s\n",
		res.Plan.Source.QuotedName(), res.Duration.Round(time.Millisecond), res.CopiedRows, res.Applied, res.AppliedRows,
		res.CutOver.Attempts, res.CutOver.LockedFor.Round(time.Millisecond), res.CutOver.Blocked.Round(time.Millisecond), orDropped(res.CutOver.OldTable))
	return 0
}

func orDropped(s string) string {
	if s == "" {
		return "dropped"
	}
	return s
}

func cleanupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c dbconn.Config
	var database, tbl string
	fs := flag.NewFlagSet("recast cleanup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	connFlags(fs, &c, &database, &tbl)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if database == "" || tbl == "" {
		fmt.Fprintln(stderr, "recast cleanup: --database and --table are required")
		return 2
	}
	if c.Password == "" {
		c.Password = os.Getenv("RECAST_PASSWORD")
	}
	done, err := migration.Cleanup(ctx, c, database, tbl)
	for _, d := range done {
		fmt.Fprintln(stdout, d)
	}
	if err != nil {
		fmt.Fprintf(stderr, "recast: %s\n", flatError(err))
		return 1
	}
	if len(done) == 0 {
		fmt.Fprintln(stdout, "nothing to clean up")
	}
	return 0
}

// flatError flattens an error for the one-line failure message.
func flatError(err error) string {
	if errors.Is(err, migration.ErrInterrupted) {
		return "interrupted; the original table is untouched and progress was saved: run the same command with --resume to continue, or recast cleanup to abandon it"
	}
	if errors.Is(err, context.Canceled) {
		return "interrupted; the original table is untouched (helper tables, if any remain, are removed by recast cleanup)"
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
