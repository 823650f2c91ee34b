package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/status"
	"github.com/recast-osc/recast/internal/testutil"
)

// ctlRun runs recast with args and returns the exit code and the output.
func ctlRun(args ...string) (int, string, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func ctlFreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCtlSteersMigration runs recast migrate with --http and
// --serve-socket-file and steers it with recast ctl and gh-ost commands.
func TestCtlSteersMigration(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db,
		"CREATE TABLE t (id INT NOT NULL PRIMARY KEY, a VARCHAR(40) NOT NULL)",
		"INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_20000", "ANALYZE TABLE t")
	sb := testutil.Sandbox(t)
	dir := t.TempDir()
	flagFile, sock := filepath.Join(dir, "throttle"), filepath.Join(dir, "recast.sock")
	if err := os.WriteFile(flagFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := ctlFreeAddr(t)
	args := []string{"migrate", "--host", sb.Primary.Host, "--port", strconv.Itoa(sb.Primary.Port),
		"--user", sb.User, "--password", sb.Password, "--database", schema, "--table", "t", "--alter", "ADD COLUMN c INT",
		"--execute", "--method", "copy", "--progress-interval", "1s", "--threads", "2", "--max-chunk-rows", "20", "--chunk-time", "5ms",
		"--http", addr, "--serve-socket-file", sock, "--throttle-flag-file", flagFile, "--max-lag", "0"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var mout, merr syncBuffer
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, args, &mout, &merr) }()
	defer func() {
		cancel()
		<-exited
	}()

	ctl := func(want int, a ...string) string {
		t.Helper()
		code, out, errOut := ctlRun(append([]string{"ctl", "--http", addr}, a...)...)
		if code != want {
			t.Fatalf("recast ctl %v: exit %d, want %d\n%s%s\nmigrate stderr:\n%s", a, code, want, out, errOut, merr.String())
		}
		return out + errOut
	}
	snapshot := func() status.Snapshot {
		t.Helper()
		var s status.Snapshot
		if err := json.Unmarshal([]byte(ctl(0, "status", "--json")), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	waitFor := func(what string, cond func(status.Snapshot) bool) status.Snapshot {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			if code, out, _ := ctlRun("ctl", "--http", addr, "status", "--json"); code == 0 {
				var s status.Snapshot
				if json.Unmarshal([]byte(out), &s) == nil && cond(s) {
					return s
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; migrate stderr:\n%s", what, merr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	waitFor("copy phase, throttled by the flag file", func(s status.Snapshot) bool {
		return s.Phase == "copy" && strings.Contains(s.Throttle.Reason, "throttle flag file")
	})
	if out := ctl(0, "status"); !strings.Contains(out, "phase:     copy") || !strings.Contains(out, "throttled: throttle flag file") {
		t.Errorf("status:\n%s", out)
	}
	if out := ctl(0, "set", "threads=1", "chunk-time=50ms"); !strings.Contains(out, "set chunk-time=50ms, threads=1") {
		t.Errorf("set: %s", out)
	}
	if s := snapshot(); s.Settings.Threads != 1 || s.Settings.ChunkTime != "50ms" {
		t.Errorf("settings after set: %+v", s.Settings)
	}
	ctl(1, "set", "threads=0")
	ctl(1, "set", "nosuch=1")

	// pause, then lift the flag file: still paused by the operator.
	ctl(0, "pause")
	os.Remove(flagFile)
	s := waitFor("paused by operator only", func(s status.Snapshot) bool { return s.Throttle.Reason == "paused by operator" })
	rows := s.Copy.RowsCopied
	// The progress line (every --progress-interval) shows the pause.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(merr.String(), "| throttled: paused by operator"); {
		if time.Now().After(deadline) {
			t.Fatalf("no progress line shows the pause:\n%s", merr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(merr.String(), "recast: ") || !strings.Contains(merr.String(), "[copy] copy ") {
		t.Errorf("progress line:\n%s", merr.String())
	}
	if s := snapshot(); s.Copy.RowsCopied != rows {
		t.Errorf("rows copied while paused: %d -> %d", rows, s.Copy.RowsCopied)
	}

	// gh-ost commands on the socket.
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "sup\nchunk-size=?\n")
	conn.(*net.UnixConn).CloseWrite()
	got, _ := io.ReadAll(conn)
	conn.Close()
	if !strings.Contains(string(got), "phase copy;") || !strings.Contains(string(got), "\n20\n") {
		t.Errorf("socket answered %q", got)
	}

	ctl(0, "resume")
	waitFor("copying again", func(s status.Snapshot) bool { return s.Copy.RowsCopied > rows })
	ctl(0, "set", "max-chunk-rows=5000", "threads=4", "chunk-time=200ms")
	ctl(1, "cutover") // nothing is postponed

	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("migrate exited %d:\n%s%s", code, mout.String(), merr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("migrate did not finish:\n%s", merr.String())
	}
	exited <- 0 // for the deferred receive
	if !strings.Contains(mout.String(), "migrated `"+schema+"`.`t`") {
		t.Errorf("stdout: %s", mout.String())
	}
	for _, want := range []string{"status and control on http://" + addr, "throttled: copy paused"} {
		if !strings.Contains(merr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, merr.String())
		}
	}
	if _, err := os.Stat(sock); err == nil {
		t.Error("the socket file is left behind")
	}
	if out := ctl(1, "status"); !strings.Contains(out, "no migration answers") {
		t.Errorf("status after the end: %s", out)
	}
}

func TestCtlUsageAndFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ctl"}, 2, "usage: recast ctl"},
		{[]string{"ctl", "status"}, 2, "usage: recast ctl"}, // no --http, no $RECAST_HTTP
		{[]string{"ctl", "--http", "127.0.0.1:1", "frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"ctl", "--http", "127.0.0.1:1", "set"}, 2, "give KEY=VALUE"},
		{[]string{"ctl", "--http", "127.0.0.1:1", "set", "threads"}, 2, "is not KEY=VALUE"},
		{[]string{"ctl", "--http", "127.0.0.1:1", "pause", "now"}, 2, "unexpected"},
		{[]string{"migrate", "--database", "d", "--table", "t", "--alter", "FORCE", "--max-load", "Threads_running"}, 2, "--max-load: threshold"},
		{[]string{"migrate", "--database", "d", "--table", "t", "--alter", "FORCE", "--critical-load", "x=y"}, 2, "--critical-load: threshold"},
		{[]string{"migrate", "--database", "d", "--table", "t", "--alter", "FORCE", "--replica", "h:x"}, 1, `--replica "h:x": want HOST:PORT`},
	} {
		if os.Getenv("RECAST_HTTP") != "" && len(c.args) == 2 {
			continue
		}
		code, out, errOut := ctlRun(c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("%v: exit %d, output %q; want exit %d with %q", c.args, code, out+errOut, c.code, c.want)
		}
	}
}
