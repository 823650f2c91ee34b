package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/migration"
	"github.com/recast-osc/recast/internal/status"
)

// parseMigrate runs "recast migrate args" up to the migration and returns
// the options it would run with (exit code and output when it stops
// before).
func parseMigrate(t *testing.T, args ...string) (migration.Options, int, string) {
	t.Helper()
	var got migration.Options
	prev := migrateRunner
	migrateRunner = func(_ *cobra.Command, o migration.Options, rt migration.Runtime, _ *controlFlags, _, _ io.Writer) error {
		got, gotRT = o, rt
		return nil
	}
	defer func() { migrateRunner = prev }()
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"migrate", "--conf", ""}, args...), &out, &errOut)
	return got, code, out.String() + errOut.String()
}

var required = []string{"--database", "d", "--table", "t", "--alter", "FORCE"}

// gotRT is the runtime of the last parseMigrate.
var gotRT migration.Runtime

func TestHelpVersionCompletion(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string // on stdout
		err  string // on stderr
	}{
		{[]string{"migrate", "--help"}, 0, "--max-chunk-rows", ""},
		{[]string{"help", "migrate"}, 0, "--cut-over-lock-timeout", ""},
		{[]string{"ctl", "--help"}, 0, "coordinates", ""},
		{[]string{"sandbox", "up", "--help"}, 0, "--flavor", ""},
		{[]string{"--help"}, 0, "Available Commands", ""},
		{[]string{"version"}, 0, "recast ", ""},
		{[]string{"completion", "bash"}, 0, "bash completion", ""},
		{[]string{"completion", "zsh"}, 0, "#compdef recast", ""},
		{[]string{"completion", "fish"}, 0, "complete -c recast", ""},
		{[]string{}, 2, "", "Available Commands"},
		{[]string{"migrat"}, 2, "", `unknown command "migrat" for "recast"; did you mean migrate?`},
		{[]string{"migrate", "--hots", "x"}, 2, "", "unknown flag --hots; did you mean --host"},
		{[]string{"migrate", "--chunk-size", "100"}, 2, "", "--chunk-size: a gh-ost flag; recast sizes chunks by --chunk-time up to --max-chunk-rows"},
		{[]string{"migrate", "--conf", ""}, 2, "", "required flags missing: --database, --table, --alter"},
		{[]string{"migrate", "--conf", "", "--database", "d"}, 2, "", "required flags missing: --table, --alter"},
		{[]string{"sandbox", "down", "--port", "1"}, 2, "", "unknown flag --port"},
		{[]string{"ctl", "stauts"}, 2, "", `unknown command "stauts"; did you mean status?`},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), c.args, &out, &errOut)
		if code != c.code || !strings.Contains(out.String(), c.out) || !strings.Contains(errOut.String(), c.err) {
			t.Errorf("%v: exit %d (want %d)\nstdout %.300q (want %q)\nstderr %.300q (want %q)", c.args, code, c.code, out.String(), c.out, errOut.String(), c.err)
		}
		// A usage error is short: the message and where help is.
		if c.code == 2 && c.err != "" && !strings.Contains(c.err, "Available") {
			if n := strings.Count(errOut.String(), "\n"); n > 2 {
				t.Errorf("%v: %d lines of error output:\n%s", c.args, n, errOut.String())
			}
		}
	}
}

// TestGhostAliases: gh-ost's names set the same options as recast's.
func TestGhostAliases(t *testing.T) {
	for _, c := range []struct {
		args  []string
		check func(o migration.Options) bool
	}{
		{[]string{"--ok-to-drop-table"}, func(o migration.Options) bool { return o.DropOldTable }},
		{[]string{"--max-lag-millis", "1500"}, func(o migration.Options) bool { return o.MaxLag == 1500*time.Millisecond }},
		{[]string{"--cut-over-lock-timeout-seconds", "7"}, func(o migration.Options) bool { return o.CutOverLockTimeout == 7*time.Second }},
		{[]string{"--replica-server-id", "4242"}, func(o migration.Options) bool { return o.ServerID == 4242 }},
		{[]string{"--throttle-control-replicas", "r1:3306,r2:3307"}, func(o migration.Options) bool {
			return strings.Join(o.Replicas, " ") == "r1:3306 r2:3307"
		}},
		{[]string{"--replica", "r1:3306", "--replica", "r2:3307"}, func(o migration.Options) bool {
			return strings.Join(o.Replicas, " ") == "r1:3306 r2:3307"
		}},
		{[]string{"--throttle-flag-file", "/tmp/x", "--panic-flag-file", "/tmp/p", "--postpone-cut-over-flag-file", "/tmp/q"}, func(o migration.Options) bool {
			return o.ThrottleFlagFile == "/tmp/x" && o.PanicFlagFile == "/tmp/p" && o.PostponeCutOverFlagFile == "/tmp/q"
		}},
		{[]string{"--max-load", "Threads_running=25", "--critical-load", "Threads_running=100"}, func(o migration.Options) bool {
			return o.MaxLoad.String() == "Threads_running=25" && o.CriticalLoad.String() == "Threads_running=100"
		}},
		{[]string{"--checkpoint-seconds", "30", "--checkpoint", "--allow-on-master", "--assume-rbr", "--panic-on-warnings"}, func(o migration.Options) bool {
			return o.CheckpointInterval == 30*time.Second
		}},
		{[]string{"--debug"}, func(migration.Options) bool { return gotRT.Logger.Enabled(context.Background(), slog.LevelDebug) }},
		{nil, func(o migration.Options) bool { // the defaults, from migration.DefaultOptions
			d := migration.DefaultOptions()
			return o.MaxLag == time.Second && o.CutOverLockTimeout == d.CutOverLockTimeout && !o.DropOldTable && o.MaxChunkRows == d.MaxChunkRows
		}},
	} {
		o, code, out := parseMigrate(t, append(append([]string{}, required...), c.args...)...)
		if code != 0 || !c.check(o) {
			t.Errorf("%v: exit %d %s; options %+v", c.args, code, out, o)
		}
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-lag-millis", "100", "--max-lag", "1s"}, "--max-lag-millis and --max-lag are the same setting"},
		{[]string{"--cut-over-lock-timeout-seconds", "0"}, "must be positive"},
		{[]string{"--log-format", "xml"}, `--log-format "xml"`},
		{[]string{"--panic-on-warnings=false"}, "cannot be turned off"},
		{[]string{"--ssl-mode", "VERIFY_CA"}, "needs --ssl-ca"},
		{[]string{"--password", "x", "--ask-pass"}, "exclude each other"},
	} {
		if _, code, out := parseMigrate(t, append(append([]string{}, required...), bad.args...)...); code != 2 || !strings.Contains(out, bad.want) {
			t.Errorf("%v: exit %d, %q; want 2 with %q", bad.args, code, out, bad.want)
		}
	}
}

// TestConfPrecedence: the --conf file fills what the flags leave unset;
// flags and $RECAST_PASSWORD win.
func TestConfPrecedence(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "my.cnf")
	if err := os.WriteFile(conf, []byte("[client]\nuser=fileuser\npassword='file pw'\nport=3399\nhost=localhost\nsocket="+filepath.Join(dir, "s.sock")+"\nssl-mode=REQUIRED\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RECAST_PASSWORD", "")
	o, code, out := parseMigrate(t, append([]string{"--conf", conf}, required...)...)
	if code != 0 {
		t.Fatal(out)
	}
	if c := o.Conn; c.User != "fileuser" || c.Password != "file pw" || c.Port != 3399 || c.Socket == "" || c.TLS.EffectiveMode() != dbconn.SSLRequired {
		t.Errorf("from the file: %+v", c)
	}
	o, _, _ = parseMigrate(t, append([]string{"--conf", conf, "--user", "flaguser", "--password", "flagpw", "--port", "3306", "--ssl-mode", "DISABLED"}, required...)...)
	if c := o.Conn; c.User != "flaguser" || c.Password != "flagpw" || c.Port != 3306 || c.Socket != "" || c.TLS.EffectiveMode() != dbconn.SSLDisabled {
		t.Errorf("flags over the file (and no file socket with --port): %+v", c)
	}
	t.Setenv("RECAST_PASSWORD", "envpw")
	if o, _, _ = parseMigrate(t, append([]string{"--conf", conf}, required...)...); o.Conn.Password != "envpw" {
		t.Errorf("$RECAST_PASSWORD over the file: %q", o.Conn.Password)
	}
	if _, code, out := parseMigrate(t, append([]string{"--conf", filepath.Join(dir, "missing.cnf")}, required...)...); code != 2 || !strings.Contains(out, "--conf") {
		t.Errorf("missing --conf file: %d %s", code, out)
	}
	// ~/.my.cnf is read by default, and its absence is fine.
	t.Setenv("HOME", dir)
	if err := os.WriteFile(filepath.Join(dir, ".my.cnf"), []byte("[client]\nuser=homeuser\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var got migration.Options
	prev := migrateRunner
	migrateRunner = func(_ *cobra.Command, o migration.Options, rt migration.Runtime, _ *controlFlags, _, _ io.Writer) error {
		got, gotRT = o, rt
		return nil
	}
	defer func() { migrateRunner = prev }()
	var b bytes.Buffer
	if code := run(context.Background(), append([]string{"migrate"}, required...), &b, &b); code != 0 || got.Conn.User != "homeuser" {
		t.Errorf("~/.my.cnf: exit %d %s, user %q", code, b.String(), got.Conn.User)
	}
}

// TestAskPassNotATerminal: --ask-pass refuses a stdin that is no terminal.
func TestAskPassNotATerminal(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := readPassword(f, io.Discard); err == nil || !strings.Contains(err.Error(), "not a terminal") {
		t.Errorf("got %v", err)
	}
}

// TestOutputNotATerminal: a file gets no progress bar (no escape
// sequences), and --log-format json writes JSON lines.
func TestOutputNotATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if w := progressWriter(f); w != io.Writer(f) {
		t.Errorf("a file got %T", w)
	}
	var b bytes.Buffer
	log, err := newLogger(&b, false, "json")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hello", "k", 1)
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil || m["msg"] != "hello" || m["k"] != float64(1) {
		t.Errorf("json log %q: %v", b.String(), err)
	}
}

// TestCtlToken: recast ctl sends --http-token / $RECAST_HTTP_TOKEN; the
// endpoint refuses requests without it.
func TestCtlToken(t *testing.T) {
	srv, err := status.ListenAuth("127.0.0.1:0", "tok-123", migration.NewControl(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Setenv("RECAST_HTTP_TOKEN", "")
	if code, out, errOut := ctlRun("ctl", "--http", srv.Addr(), "status"); code != 1 || !strings.Contains(errOut, "401") {
		t.Errorf("no token: exit %d %s%s", code, out, errOut)
	}
	if code, out, errOut := ctlRun("ctl", "--http", srv.Addr(), "--http-token", "wrong", "pause"); code != 1 || !strings.Contains(errOut, "wrong token") {
		t.Errorf("wrong token: exit %d %s%s", code, out, errOut)
	}
	if code, out, errOut := ctlRun("ctl", "--http", srv.Addr(), "--http-token", "tok-123", "status", "--json"); code != 0 || !strings.Contains(out, `"phase"`) {
		t.Errorf("token flag: exit %d %s%s", code, out, errOut)
	}
	t.Setenv("RECAST_HTTP_TOKEN", "tok-123")
	if code, out, errOut := ctlRun("ctl", "--http", srv.Addr(), "info"); code != 0 {
		t.Errorf("token from the environment: exit %d %s%s", code, out, errOut)
	}
	if code, _, errOut := ctlRun("ctl", "--http", srv.Addr(), "coordinates"); code != 1 || !strings.Contains(errOut, "no binlog position applied yet") {
		t.Errorf("coordinates before the copy: exit %d %s", code, errOut)
	}
}

// TestHTTPBeyondLoopbackNeedsToken: recast migrate --http 0.0.0.0:P
// without a token stops before connecting anywhere.
func TestHTTPBeyondLoopbackNeedsToken(t *testing.T) {
	t.Setenv("RECAST_HTTP_TOKEN", "")
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"migrate", "--conf", "", "--port", "1", "--http", "0.0.0.0:0"}, required...), &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "listens beyond this machine") || !strings.Contains(errOut.String(), "--http-token") {
		t.Errorf("exit %d, %s", code, errOut.String())
	}
}
