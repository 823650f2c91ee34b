package status

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fake is a Controller that records what it is told.
type fake struct {
	mu       sync.Mutex
	calls    []string
	settings Settings
	phase    string
}

func newFake() *fake {
	return &fake{phase: PhaseCopy, settings: Settings{Threads: 2, ChunkTime: "200ms", MaxChunkRows: 5000, MaxLag: "1s"}}
}

func (f *fake) record(s string) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.mu.Unlock()
}

func (f *fake) Calls() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, "; ")
}

func (f *fake) Status() Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	lag := 0.25
	eta := 42.0
	return Snapshot{Table: "`d`.`t`", Alter: "ADD COLUMN c INT", Phase: f.phase, Settings: f.settings,
		Copy:     Copy{RowsCopied: 500, RowsEstimated: 1000, Percent: 50, RowsPerSecond: 100, ChunkSize: 100},
		Checksum: &Checksum{RowsCompared: 200, RowsTotal: 500, RowsPerSecond: 40},
		Apply:    Apply{IncomingPerSecond: 10, AppliedPerSecond: 12, BacklogEvents: 3, BacklogBytes: 2048, Backlog: "draining", AppliedPosition: "mysql-bin.000007:4242"},
		Replicas: []Replica{{Name: "r1:3306", LagSeconds: &lag}, {Name: "r2:3306", Error: "Access denied", Lagging: true}},
		Throttle: Throttle{Throttled: true, Reason: "replica lag: r2:3306 unreadable (Access denied)"},
		ETA:      ETA{Seconds: &eta, Text: "copy 42s"},
	}
}

func (f *fake) History() []Sample {
	return []Sample{{Time: 1, Percent: 10}, {Time: 2, Percent: 20, Throttled: true, Lags: map[string]float64{"r1:3306": 0.2}}}
}
func (f *fake) Pause() error  { f.record("pause"); return nil }
func (f *fake) Resume() error { f.record("resume"); return nil }
func (f *fake) Set(k, v string) error {
	if k == "bad" {
		return errors.New("unknown setting \"bad\"")
	}
	f.record("set " + k + "=" + v)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch k {
	case "max-chunk-rows":
		f.settings.MaxChunkRows = atoi(v)
	case "max-lag":
		f.settings.MaxLag = v
	}
	return nil
}
func (f *fake) Unpostpone() error      { f.record("unpostpone"); return nil }
func (f *fake) Abort(why string) error { f.record("abort " + why); return nil }

func atoi(s string) int {
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
	}
	return n
}

func serve(t *testing.T, c Controller) *Server {
	t.Helper()
	s, err := Listen("127.0.0.1:0", c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHTTPEndpoints(t *testing.T) {
	f := newFake()
	s := serve(t, f)
	base := "http://" + s.Addr()

	code, body := get(t, base+"/status")
	var snap Snapshot
	if code != 200 || json.Unmarshal([]byte(body), &snap) != nil || snap.Phase != PhaseCopy || snap.Replicas[1].LagSeconds != nil {
		t.Fatalf("/status: %d %s", code, body)
	}
	for _, want := range []string{`"lag_seconds": null`, `"backlog": "draining"`, `"incoming_events_per_second": 10`, `"mdl_blockers"`} {
		if !strings.Contains(body, want) {
			t.Errorf("/status lacks %s", want)
		}
	}
	if code, body := get(t, base+"/history"); code != 200 || !strings.Contains(body, `"throttled": true`) {
		t.Errorf("/history: %d %s", code, body)
	}
	code, body = get(t, base+"/")
	if code != 200 || !strings.Contains(body, `id="chart-progress"`) {
		t.Errorf("/: %d", code)
	}
	for _, external := range []string{`src="http`, `href="http`, `src="//`, "@import"} {
		if strings.Contains(body, external) {
			t.Errorf("the page loads something from elsewhere: %s", external)
		}
	}
	code, body = get(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`recast_phase{phase="copy"} 1`, `recast_phase{phase="done"} 0`, "recast_rows_copied_total 500", "recast_copy_progress_ratio 0.5",
		`recast_replica_lag_seconds{replica="r1:3306"} 0.25`, `recast_replica_lag_readable{replica="r2:3306"} 0`,
		"recast_throttled 1", "recast_eta_seconds 42", "recast_backlog_bytes 2048", "recast_copy_threads 2", "recast_max_lag_seconds 1",
		"# TYPE recast_rows_copied_total counter", "go_goroutines", "recast_checksum_rows_compared_total 200", "recast_checksum_rows_per_second 40",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, `recast_replica_lag_seconds{replica="r2:3306"}`) {
		t.Error("an unreadable lag is exported as a number")
	}

	// POST endpoints through the client.
	c := NewClient(s.Addr())
	ctx := context.Background()
	for _, p := range []string{"pause", "resume", "cutover"} {
		if _, err := c.Post(ctx, p, nil); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if msg, err := c.Post(ctx, "set", url.Values{"threads": {"1"}, "chunk-time": {"50ms"}}); err != nil || msg != "set chunk-time=50ms, threads=1" {
		t.Fatalf("set: %q %v", msg, err)
	}
	if _, err := c.Post(ctx, "set", url.Values{"bad": {"1"}}); err == nil || !strings.Contains(err.Error(), "unknown setting") {
		t.Fatalf("set bad: %v", err)
	}
	if _, err := c.Post(ctx, "set", nil); err == nil {
		t.Fatal("empty set accepted")
	}
	if _, err := c.Post(ctx, "abort", url.Values{"reason": {"test over"}}); err != nil {
		t.Fatal(err)
	}
	if got := f.Calls(); got != "pause; resume; unpostpone; set chunk-time=50ms; set threads=1; abort test over" {
		t.Fatalf("calls: %s", got)
	}
	if st, err := c.Status(ctx); err != nil || st.Table != "`d`.`t`" {
		t.Fatalf("client status: %+v %v", st, err)
	}

	// A POST without the header (a form on another site) is refused; so
	// is a GET of a POST endpoint and a request for another host name.
	resp, err := http.Post(base+"/abort", "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("POST without %s: %d", Header, resp.StatusCode)
	}
	if code, _ := get(t, base+"/pause"); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET /pause: %d", code)
	}
	req, _ := http.NewRequest("GET", base+"/status", http.NoBody)
	req.Host = "evil.example:80"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("rebinding host: %d", resp.StatusCode)
	}
	if strings.Contains(f.Calls(), "evil") || strings.Count(f.Calls(), "abort") != 1 {
		t.Fatalf("calls: %s", f.Calls())
	}
}

func TestClientNoServer(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c := NewClient(addr)
	c.HTTP.Timeout = time.Second
	if _, err := c.Status(context.Background()); err == nil || !strings.Contains(err.Error(), "no migration answers") {
		t.Fatal(err)
	}
}

func TestSocketCommands(t *testing.T) {
	f := newFake()
	path := filepath.Join(t.TempDir(), "recast.sock")
	s, err := ListenSocket(path, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	send := func(cmds string) string {
		t.Helper()
		conn, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, cmds)
		conn.(*net.UnixConn).CloseWrite()
		b, _ := io.ReadAll(conn)
		return string(b)
	}
	cases := []struct{ cmd, want, call string }{
		{"status", "phase:     copy", ""},
		{"sup", "phase copy; copy 50.0%", ""},
		{"throttle", "throttled", "pause"},
		{"no-throttle", "no longer paused", "resume"},
		{"unthrottle", "no longer paused", "resume"},
		{"info", "phase:     copy", ""},
		{"coordinates", "mysql-bin.000007:4242\n", ""},
		{"no-postpone", "cut-over no longer postponed", "unpostpone"},
		{"chunk-size=250", "chunk-size=250 set", "set max-chunk-rows=250"},
		{"chunk-size=?", "250", ""},
		{"max-lag-millis=1500", "max-lag-millis=1500 set", "set max-lag=1.5s"},
		{"max-lag-millis=?", "1500", ""},
		{"max-load=Threads_running=30", "set", "set max-load=Threads_running=30"},
		{"critical-load=Threads_running=90", "set", "set critical-load=Threads_running=90"},
		{"threads=3", "threads=3 set", "set threads=3"},
		{"unpostpone", "cut-over no longer postponed", "unpostpone"},
		{"panic", "aborting", "abort panic command on the socket"},
		{"help", "gh-ost", ""},
		{"nonsense", "ERROR: unknown command", ""},
		{"max-lag-millis=x", "ERROR:", ""},
		{"bad=1", "ERROR: unknown setting", ""},
	}
	for _, c := range cases {
		before := f.Calls()
		got := send(c.cmd + "\n")
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.cmd, got, c.want)
		}
		after := strings.TrimPrefix(strings.TrimPrefix(f.Calls(), before), "; ")
		if after != c.call {
			t.Errorf("%s: called %q, want %q", c.cmd, after, c.call)
		}
	}
	// Only the owner may connect: mode 0600.
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket file: %v, %v; want a socket of mode 0600", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".recast-sock-*")); len(left) > 0 {
		t.Errorf("temporary directories left: %v", left)
	}
	// Several commands on one connection.
	if got := send("throttle\nno-throttle\n"); strings.Count(got, "\n") != 2 {
		t.Errorf("two commands: %q", got)
	}
	// A second server on the same live socket is refused; after Close the
	// file is gone and a new one can start.
	if _, err := ListenSocket(path, f, nil); err == nil {
		t.Fatal("second server on a live socket")
	}
	s.Close()
	s2, err := ListenSocket(path, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
}

func TestText(t *testing.T) {
	txt := newFake().Status().Text()
	for _, want := range []string{"replica:   r1:3306 lag 250ms", "r2:3306 lag unreadable: Access denied", "throttled: replica lag", "eta:       copy 42s", "backlog 3 events, 2.0 KiB (draining)"} {
		if !strings.Contains(txt, want) {
			t.Errorf("text lacks %q:\n%s", want, txt)
		}
	}
}

// lockFake adds the copy lock mode and the deferral stats to fake's status.
type lockFake struct{ *fake }

func (f lockFake) Status() Snapshot {
	s := f.fake.Status()
	s.Copy.Lock, s.Copy.LockReason = "lock-free", "the server makes commits visible in binlog order"
	s.Copy.Deferral = &Deferral{HeldNow: 3, MaxHeld: 17, RangesOpen: 2, Held: 40, Released: 37, Ranges: 9, Skipped: 12}
	return s
}

func TestCopyLockStatus(t *testing.T) {
	c := lockFake{newFake()}
	txt := c.Status().Text()
	if want := "copy lock: lock-free (the server makes commits visible in binlog order); 3 event(s) held (max 17), 2 range(s) open"; !strings.Contains(txt, want) {
		t.Errorf("text lacks %q:\n%s", want, txt)
	}
	if txt := newFake().Status().Text(); strings.Contains(txt, "copy lock") {
		t.Errorf("no lock mode known, yet a copy lock line:\n%s", txt)
	}
	s := serve(t, c)
	code, body := get(t, "http://"+s.Addr()+"/status")
	if code != http.StatusOK {
		t.Fatalf("GET /status: %d %s", code, body)
	}
	var got struct {
		Copy struct {
			Lock     string         `json:"lock"`
			Reason   string         `json:"lock_reason"`
			Deferral map[string]int `json:"deferral"`
		} `json:"copy"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	d := got.Copy.Deferral
	if got.Copy.Lock != "lock-free" || got.Copy.Reason == "" || d["held_events"] != 3 || d["max_held_events"] != 17 || d["ranges_open"] != 2 || d["held_total"] != 40 || d["skipped_total"] != 12 {
		t.Errorf("status JSON: %+v\n%s", got.Copy, body)
	}
	code, body = get(t, "http://"+s.Addr()+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, want := range []string{`recast_copy_lock_mode{mode="lock-free",reason="the server makes commits visible in binlog order"} 1`,
		"recast_deferral_held_events 3", "recast_deferral_max_held_events 17", "recast_deferral_ranges_open 2", "recast_deferral_held_events_total 40", "recast_deferral_skipped_changes_total 12"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if _, body := get(t, "http://"+serve(t, newFake()).Addr()+"/metrics"); strings.Contains(body, "recast_deferral_held_events ") {
		t.Error("deferral metrics without a lock-free copy")
	}
}
