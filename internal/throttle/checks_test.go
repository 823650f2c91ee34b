package throttle

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHTTPCheck: --throttle-http throttles while the URL does not answer
// 200, and when it does not answer in time; a running Throttler follows it.
func TestHTTPCheck(t *testing.T) {
	var code atomic.Int32
	code.Store(http.StatusOK)
	slow := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-slow:
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(int(code.Load()))
	}))
	defer srv.Close()
	defer close(slow)
	ctx := context.Background()
	c := HTTPCheck(srv.URL+"/ok", time.Second)
	if r := c.Run(ctx); r != "" {
		t.Fatalf("200 throttles: %s", r)
	}
	code.Store(http.StatusServiceUnavailable)
	if r := c.Run(ctx); !strings.Contains(r, "answered 503") {
		t.Fatalf("503: %q", r)
	}
	start := time.Now()
	if r := HTTPCheck(srv.URL+"/slow", 100*time.Millisecond).Run(ctx); !strings.Contains(r, "did not answer within 100ms") {
		t.Fatalf("slow: %q", r)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the request was not time-limited: %s", d)
	}
	if r := HTTPCheck("http://127.0.0.1:1/", time.Second).Run(ctx); !strings.HasPrefix(r, "throttle-http: ") {
		t.Errorf("refused connection: %q", r)
	}

	hc := HTTPCheck(srv.URL+"/ok", time.Second)
	hc.Every = 5 * time.Millisecond
	th := run(t, Config{Checks: []Check{hc}})
	eventually(t, "throttled by the 503", func() bool { ok, why := th.Throttled(); return ok && strings.Contains(why, "503") })
	code.Store(http.StatusOK)
	eventually(t, "the throttle lifted after the 200", func() bool { ok, _ := th.Throttled(); return !ok })
	if err := th.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCheckNotRunYet: a check counts as throttling until it has run once.
func TestCheckNotRunYet(t *testing.T) {
	th := New(Config{Checks: []Check{{Name: "throttle-query", Run: func(context.Context) string { return "" }}}})
	th.Evaluate()
	if ok, why := th.Throttled(); !ok || !strings.Contains(why, "not checked yet") {
		t.Fatalf("before the first check: %v %q", ok, why)
	}
	th.Prime(context.Background())
	if ok, why := th.Throttled(); ok {
		t.Fatalf("after the first check: %q", why)
	}
}

// lockedBuffer is a log sink for the tests.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(has string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, has) {
			n++
		}
	}
	return n
}

// TestThrottleLogFlapping: a throttle flapping around its limit logs its
// state changes once per LogEvery, not once per flap, with a summary of the
// periods not logged; a reason of another kind is logged at once.
func TestThrottleLogFlapping(t *testing.T) {
	var logs lockedBuffer
	rep := &fakeReplica{}
	flag := filepath.Join(t.TempDir(), "throttle")
	th := New(Config{Replicas: []Replica{rep.replica("r1")}, MaxLag: time.Second, FlagFile: flag, LogEvery: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	flap := func(n int) {
		for i := range n {
			rep.set(2*time.Second+time.Duration(i)*time.Millisecond, nil) // lag over the limit, a different number each time
			th.readReplica(ctx, 0)
			th.Evaluate()
			rep.set(0, nil)
			th.readReplica(ctx, 0)
			th.Evaluate()
		}
	}
	flap(50)
	if n, m := logs.lines("throttled: copy paused"), logs.lines("throttle lifted"); n != 1 || m != 1 {
		t.Fatalf("50 flaps logged %d throttled and %d lifted lines, want 1 and 1:\n%s", n, m, logs.b.String())
	}
	// Another kind of reason: logged at once, with the summary of the
	// periods not logged.
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	th.Evaluate()
	if n := logs.lines("throttle flag file"); n != 1 {
		t.Fatalf("flag file logged %d times:\n%s", n, logs.b.String())
	}
	if n := logs.lines("throttled 49 more time(s)"); n != 1 {
		t.Errorf("no summary of the 49 periods not logged:\n%s", logs.b.String())
	}
	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	th.Evaluate()
	if n := logs.lines("throttle lifted"); n != 2 {
		t.Errorf("the flag file's period: %d lifted lines", n)
	}
	// The lag again, with the default interval passed: logged.
	th.logs.lastAt[kind("replica lag: r1 2s > 1s")] = time.Now().Add(-2 * time.Hour)
	flap(1)
	if n := logs.lines("throttled: copy paused"); n != 3 {
		t.Errorf("after LogEvery the same reason is logged again: %d lines:\n%s", n, logs.b.String())
	}
}
