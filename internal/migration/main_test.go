package migration

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/testutil"
)

func TestMain(m *testing.M) {
	code := testutil.NoLeaks(testutil.Main(m, 1))
	removeRecastBinary()
	os.Exit(code)
}

// testOpts is a migration's configuration and runtime, set up together by
// the tests.
type testOpts struct {
	Options
	Runtime
}

// runT runs the migration o describes.
func runT(ctx context.Context, o testOpts) (*Result, error) { return Run(ctx, o.Options, o.Runtime) }

// testOptions returns options for migrating schema.tbl on the test server.
// Replica lag is not watched (MaxLag 0): tests share one sandbox replica
// and must not wait for each other's lag; those about lag set it.
func testOptions(t testing.TB, schema, tbl, alter string) testOpts {
	t.Helper()
	sb := testutil.Sandbox(t)
	o := testOpts{Options: DefaultOptions()}
	o.MaxLag = 0
	// Not paced: the tests run in parallel on one server, and the pacer
	// would take the other tests' sessions and writes for an application
	// to protect. TestPacedCopy and TestActiveSessions test the pacing.
	o.MaxLatencyRatio = 0
	o.Conn = dbconn.Config{Host: sb.Primary.Host, Port: sb.Primary.Port, User: sb.User, Password: sb.Password}
	o.Database, o.Table, o.Alter, o.Execute = schema, tbl, alter, true
	o.ProgressInterval = 0
	o.Logger = slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: testLogLevel()}))
	o.Progress = io.Discard
	o.CutOverLockTimeout = 2 * time.Second
	o.Method = MethodCopy // these tests exercise the copy; mdl_test.go covers --method auto
	if m := os.Getenv("RECAST_TEST_COPY_LOCK"); m != "" {
		o.CopyLock = m // run the suites with the locking copy: share
	}
	return o
}

// testLogLevel is RECAST_TEST_LOG (debug, info, warn, error; 1: info), by
// default warn: the level of the migrations' logs in the test output.
func testLogLevel() slog.Level {
	l := slog.LevelWarn
	if v := os.Getenv("RECAST_TEST_LOG"); v == "1" {
		l = slog.LevelInfo
	} else if v != "" {
		_ = l.UnmarshalText([]byte(v))
	}
	return l
}

type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
