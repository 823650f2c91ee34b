package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/recast-osc/recast/internal/check"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/migration"
)

// connOptions are the connection flags shared by migrate and cleanup.
type connOptions struct {
	c                *dbconn.Config
	database, table  *string
	conf             string
	askPass          bool
	ssl              dbconn.TLS
	fs               *pflag.FlagSet
	stdin            *os.File
	stderr           io.Writer
	passwordFromFile bool
}

// addConnFlags registers the connection flags on fs.
func addConnFlags(fs *pflag.FlagSet, c *dbconn.Config, database, tbl *string, stderr io.Writer) *connOptions {
	co := &connOptions{c: c, database: database, table: tbl, fs: fs, stdin: os.Stdin, stderr: stderr}
	fs.StringVar(&c.Host, "host", "127.0.0.1", "server host")
	fs.IntVar(&c.Port, "port", 3306, "server port")
	fs.StringVar(&c.Socket, "socket", "", "connect through this unix socket instead of --host/--port")
	fs.StringVar(&c.User, "user", "root", "user")
	fs.StringVar(&c.Password, "password", "", "password (better: --ask-pass, --conf, or $RECAST_PASSWORD)")
	fs.BoolVar(&co.askPass, "ask-pass", false, "read the password from the terminal (no echo)")
	fs.StringVar(&co.conf, "conf", "~/.my.cnf", `read user, password, host, port, socket and ssl-* from this file's [client] section (flags win; --conf "" reads none)`)
	fs.StringVar(&co.ssl.Mode, "ssl-mode", "", "TLS: "+strings.Join(dbconn.SSLModes, ", ")+" (default VERIFY_CA with --ssl-ca, else PREFERRED)")
	fs.StringVar(&co.ssl.CA, "ssl-ca", "", "TLS: PEM file of the CA that signed the server's certificate")
	fs.StringVar(&co.ssl.Cert, "ssl-cert", "", "TLS: PEM client certificate")
	fs.StringVar(&co.ssl.Key, "ssl-key", "", "TLS: PEM key of --ssl-cert")
	fs.StringVar(database, "database", "", "database (schema) of the table")
	fs.StringVar(tbl, "table", "", "table to change")
	return co
}

// resolve completes the connection settings. Precedence, highest first:
// command-line flags; for the password: --password, --ask-pass,
// $RECAST_PASSWORD; then the --conf file (~/.my.cnf by default); then the
// defaults shown by --help. A socket from the file is used only when
// neither --host nor --port is given and the file's host is empty or
// localhost (as the mysql client does).
func (co *connOptions) resolve() error {
	changed := co.fs.Changed
	if changed("password") && co.askPass {
		return usagef("--password and --ask-pass exclude each other")
	}
	path, optional := co.conf, !changed("conf")
	if strings.HasPrefix(path, "~/") {
		if home, err := os.UserHomeDir(); err == nil && home != "" {
			path = filepath.Join(home, path[2:])
		} else {
			path = ""
		}
	}
	if path != "" {
		f, err := dbconn.ReadMyCnf(path, optional)
		if err != nil {
			return usagef("%v", err)
		}
		set := f.Set
		if set["user"] && !changed("user") {
			co.c.User = f.User
		}
		if set["host"] && !changed("host") {
			co.c.Host = f.Host
		}
		if set["port"] && !changed("port") {
			co.c.Port = f.Port
		}
		if set["socket"] && !changed("socket") && !changed("host") && !changed("port") && (f.Host == "" || f.Host == "localhost") {
			co.c.Socket = f.Socket
		}
		if set["ssl-mode"] && !changed("ssl-mode") {
			co.ssl.Mode = f.SSLMode
		}
		if set["ssl-ca"] && !changed("ssl-ca") {
			co.ssl.CA = f.SSLCA
		}
		if set["ssl-cert"] && !changed("ssl-cert") {
			co.ssl.Cert = f.SSLCert
		}
		if set["ssl-key"] && !changed("ssl-key") {
			co.ssl.Key = f.SSLKey
		}
		if set["password"] && !changed("password") && !co.askPass && os.Getenv("RECAST_PASSWORD") == "" {
			co.c.Password = f.Password
			co.passwordFromFile = true
		}
	}
	switch {
	case changed("password"):
	case co.askPass:
		pw, err := readPassword(co.stdin, co.stderr)
		if err != nil {
			return err
		}
		co.c.Password = pw
	case os.Getenv("RECAST_PASSWORD") != "":
		co.c.Password = os.Getenv("RECAST_PASSWORD")
	}
	co.c.TLS = co.ssl
	if err := co.ssl.Validate(); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// readPassword reads a password from the terminal on in without echo.
func readPassword(in *os.File, prompt io.Writer) (string, error) {
	fd := int(in.Fd()) //nolint:gosec // a file descriptor fits in an int
	if !term.IsTerminal(fd) {
		return "", usagef("--ask-pass: standard input is not a terminal; give the password in a --conf file, $RECAST_PASSWORD or --password")
	}
	fmt.Fprint(prompt, "Password: ")
	b, err := term.ReadPassword(fd)
	fmt.Fprintln(prompt)
	if err != nil {
		return "", fmt.Errorf("--ask-pass: %w", err)
	}
	return string(b), nil
}

func newMigrateCmd(stdout, stderr io.Writer) *cobra.Command {
	o := migration.DefaultOptions()
	var (
		serverID           uint
		setVars, logFormat string
		verbose            bool
		co                 *connOptions
		ctlFlags           *controlFlags
		gh                 *ghostFlags
	)
	cmd := &cobra.Command{
		Use:   "migrate --database D --table T --alter \"...\" [--execute]",
		Short: "change a table's schema online (a dry run without --execute)",
		Long: `recast migrate checks the server and the ALTER, prints the plan and, with
--execute, runs it: a new table _T_new with the new definition, the rows
copied in chunks, the binlog changes applied, the tables swapped in an
atomic cut-over (the original is kept as _T_old unless --drop-old-table).

Connection settings come from the flags, else from --conf (~/.my.cnf by
default, [client] section), else the defaults; the password from
--password, --ask-pass, $RECAST_PASSWORD, then the --conf file.`,
		Example: `  recast migrate --host 127.0.0.1 --port 13306 --user recast --ask-pass \
    --database shop --table orders --alter "ADD COLUMN note VARCHAR(100)"
  recast migrate --conf ~/prod.cnf --database shop --table orders --alter "DROP INDEX idx_old" --execute --http 127.0.0.1:8080`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q (quote the --alter text)", args[0])
			}
			var missing []string
			for _, f := range []struct{ name, v string }{{"database", o.Database}, {"table", o.Table}, {"alter", o.Alter}} {
				if f.v == "" {
					missing = append(missing, "--"+f.name)
				}
			}
			if len(missing) > 0 {
				return usagef("required flags missing: %s", strings.Join(missing, ", "))
			}
			if err := co.resolve(); err != nil {
				return err
			}
			if err := gh.apply(cmd.Flags(), &o); err != nil {
				return err
			}
			if cmd.Flags().Changed("experimental-mysql") {
				fmt.Fprintln(stderr, "recast migrate: --experimental-mysql is deprecated and has no effect: MySQL 8.0.29+ is supported (docs/flavors.md); drop the flag")
			}
			vars, err := check.ParseSetVars(setVars)
			if err != nil {
				return usagef("%v", err)
			}
			o.Conn.SetVars = vars
			if err := ctlFlags.apply(&o); err != nil {
				return usagef("%v", err)
			}
			o.ServerID = uint32(serverID) //nolint:gosec // a server id is 32 bits; pflag checks the range below
			if uint(o.ServerID) != serverID {
				return usagef("--server-id %d: want 1..4294967295", serverID)
			}
			errw := progressWriter(stderr) // a progress bar on a terminal
			log, err := newLogger(errw, verbose, logFormat)
			if err != nil {
				return usagef("%v", err)
			}
			rt := migration.Runtime{Logger: log, Pause: faultPause(stderr), Progress: errw}
			return migrateRunner(cmd, o, rt, ctlFlags, stdout, stderr)
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	co = addConnFlags(fs, &o.Conn, &o.Database, &o.Table, stderr)
	fs.StringVar(&o.Alter, "alter", "", `the ALTER TABLE body, e.g. "ADD COLUMN c INT, ADD INDEX (c)"`)
	fs.BoolVar(&o.Execute, "execute", false, "run the migration (without it: dry run, print the plan)")
	fs.BoolVar(&o.DropOldTable, "drop-old-table", false, "drop the original table after the cut-over instead of keeping it as _T_old")
	fs.Bool("experimental-mysql", false, "deprecated, no effect: MySQL is supported (see docs/flavors.md)")
	fs.BoolVar(&o.Resume, "resume", false, "continue an interrupted migration from its checkpoint (same --alter)")
	fs.DurationVar(&o.CheckpointInterval, "checkpoint-interval", o.CheckpointInterval, "how often progress is saved for --resume")
	fs.BoolVar(&o.Checksum, "checksum", o.Checksum, "compare old and new table before the cut-over (--checksum=false skips it)")
	fs.IntVar(&o.ApplyThreads, "apply-threads", o.ApplyThreads, "parallel binlog applier connections")
	fs.IntVar(&o.Threads, "threads", o.Threads, "copy chunks in flight at once")
	fs.DurationVar(&o.ChunkTime, "chunk-time", o.ChunkTime, "target duration of one copy chunk")
	fs.IntVar(&o.MaxChunkRows, "max-chunk-rows", o.MaxChunkRows, "most rows one copy chunk may read")
	fs.StringVar(&o.CopyLock, "copy-lock", o.CopyLock, "how copy chunks read the source: none (consistent read, no row locks; see docs/copy.md) or share (LOCK IN SHARE MODE)")
	fs.BoolVar(&o.DeferIndexes, "defer-indexes", false, "build the new table's plain secondary indexes after the copy (one in-place ALTER of the new table): a faster copy, but replicas lag by the build's duration (docs/copy.md)")
	fs.DurationVar(&o.CutOverLockTimeout, "cut-over-lock-timeout", o.CutOverLockTimeout, "longest the application waits per cut-over attempt")
	fs.IntVar(&o.CutOverAttempts, "cut-over-retries", o.CutOverAttempts, "cut-over attempts before giving up")
	fs.DurationVar(&o.CutOverBudget, "cut-over-budget", o.CutOverBudget, "longest the cut-over may take, waiting for metadata-lock blockers included, before giving up (table unchanged)")
	fs.StringVar(&o.Method, "method", o.Method, "auto (INSTANT/NOCOPY ALTER when the server can, else copy), copy, or instant (fail unless INSTANT works)")
	fs.DurationVar(&o.KillBlockersAfter, "kill-blockers-after", 0, "kill queries/idle transactions that have blocked the cut-over's metadata lock this long (0: never)")
	fs.Int64Var(&o.KillMaxRows, "kill-max-rows", o.KillMaxRows, "never kill a blocking transaction that modified more rows than this")
	fs.BoolVar(&o.LoadMDLPlugin, "load-mdl-plugin", false, "INSTALL SONAME 'metadata_lock_info' if it is not loaded (exact blocker detection)")
	fs.StringVar(&o.PostponeCutOverFlagFile, "postpone-cut-over-flag-file", "", "while this file exists (created if missing), keep the new table in sync and do not cut over")
	fs.DurationVar(&o.ProgressInterval, "progress-interval", o.ProgressInterval, "how often to print progress (0: never)")
	fs.UintVar(&serverID, "server-id", 0, "replica server id for recast's binlog connection (default: random)")
	fs.StringVar(&setVars, "set-vars", "", `session variables for recast's own connections, "name=value,name='x y'" (e.g. binlog_format=ROW)`)
	fs.BoolVar(&verbose, "verbose", false, "debug logging")
	fs.StringVar(&logFormat, "log-format", "text", "log lines as text (key=value) or json")
	ctlFlags = addControlFlags(fs, &o) // ctl.go: throttling, --http, --serve-socket-file
	addThrottleCompatFlags(fs, &o)     // flags_throttle.go: gh-ost's throttle sources, --exact-rowcount
	addBehaviourFlags(fs, &o)
	gh = addGhostFlags(fs) // ghost.go: gh-ost's names
	_ = cmd.RegisterFlagCompletionFunc("method", fixedCompletion("auto", "copy", "instant"))
	_ = cmd.RegisterFlagCompletionFunc("copy-lock", fixedCompletion("none", "share"))
	_ = cmd.RegisterFlagCompletionFunc("ssl-mode", fixedCompletion(dbconn.SSLModes...))
	_ = cmd.RegisterFlagCompletionFunc("log-format", fixedCompletion("text", "json"))
	return cmd
}

func fixedCompletion(vals ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return vals, cobra.ShellCompDirectiveNoFileComp
	}
}

// migrateRunner runs the migration the flags describe (tests replace it to
// examine the options).
var migrateRunner = runMigrate

func runMigrate(cmd *cobra.Command, o migration.Options, rt migration.Runtime, ctlFlags *controlFlags, stdout, stderr io.Writer) error {
	ctx := cmd.Context()
	ctl, stopCtl, err := ctlFlags.start(rt.Logger, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "recast migrate: %v\n", err)
		return exitCode(2)
	}
	defer stopCtl()
	res, err := ctl.Run(ctx, o, rt)
	if err != nil {
		fmt.Fprintf(stderr, "recast: %s\n", flatError(err))
		return exitCode(1)
	}
	if !res.Executed {
		fmt.Fprintf(stdout, "dry run: nothing was changed; add --execute to run\n%s", res.Plan.Describe())
		return nil
	}
	if res.Plan == nil { // --resume of a run killed after its swap
		fmt.Fprintf(stdout, "the interrupted run had already swapped the tables; its clean-up is done (old table: %s)\n", orDropped(res.CutOver.OldTable))
		return nil
	}
	if res.Plan.Method != migration.MethodCopy {
		fmt.Fprintf(stdout, "altered %s in %s with ALGORITHM=%s (no copy): %d attempt(s), table locked %s\n",
			res.Plan.Source.QuotedName(), res.Duration.Round(time.Millisecond), strings.ToUpper(res.Plan.Method),
			res.CutOver.Attempts, res.CutOver.LockedFor.Round(time.Millisecond))
		return nil
	}
	fmt.Fprintf(stdout, "migrated %s in %s: %d rows copied, %d binlog row changes applied (%d rows written), cut-over took %d attempt(s), table locked %s, application statements blocked %s over all attempts; old table: %s\n",
		res.Plan.Source.QuotedName(), res.Duration.Round(time.Millisecond), res.CopiedRows, res.Applied, res.AppliedRows,
		res.CutOver.Attempts, res.CutOver.LockedFor.Round(time.Millisecond), res.CutOver.Blocked.Round(time.Millisecond), orDropped(res.CutOver.OldTable))
	return nil
}

func orDropped(s string) string {
	if s == "" {
		return "dropped"
	}
	return s
}

func newCleanupCmd(stdout, stderr io.Writer) *cobra.Command {
	var c dbconn.Config
	var database, tbl string
	var co *connOptions
	cmd := &cobra.Command{
		Use:   "cleanup --database D --table T",
		Short: "remove what an interrupted migration left (helper tables, checkpoint)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if database == "" || tbl == "" {
				return usagef("--database and --table are required")
			}
			if err := co.resolve(); err != nil {
				return err
			}
			done, err := migration.Cleanup(cmd.Context(), c, database, tbl)
			for _, d := range done {
				fmt.Fprintln(stdout, d)
			}
			if err != nil {
				fmt.Fprintf(stderr, "recast: %s\n", flatError(err))
				return exitCode(1)
			}
			if len(done) == 0 {
				fmt.Fprintln(stdout, "nothing to clean up")
			}
			return nil
		},
	}
	cmd.Flags().SortFlags = false
	co = addConnFlags(cmd.Flags(), &c, &database, &tbl, stderr)
	return cmd
}
