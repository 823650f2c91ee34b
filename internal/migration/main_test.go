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

// testOptions returns options for migrating schema.tbl on the test server.
func testOptions(t testing.TB, schema, tbl, alter string) Options {
	t.Helper()
	sb := testutil.Sandbox(t)
	o := DefaultOptions()
	o.Conn = dbconn.Config{Host: sb.Primary.Host, Port: sb.Primary.Port, User: sb.User, Password: sb.Password}
	o.Database, o.Table, o.Alter, o.Execute = schema, tbl, alter, true
	o.ProgressInterval = 0
	o.Logger = slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	o.Progress = io.Discard
	o.CutOverLockTimeout = 2 * time.Second
	o.Method = MethodCopy // these tests exercise the copy; mdl_test.go covers --method auto
	return o
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
