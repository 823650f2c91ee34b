package throttle

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseThresholds(t *testing.T) {
	th, err := ParseThresholds(" Threads_running=25, Threads_connected=500.5 ")
	if err != nil {
		t.Fatal(err)
	}
	if got := th.String(); got != "Threads_running=25,Threads_connected=500.5" {
		t.Errorf("String: %q", got)
	}
	if got := strings.Join(th.Names(), ","); got != "threads_running,threads_connected" {
		t.Errorf("Names: %q", got)
	}
	if th, err := ParseThresholds(""); err != nil || len(th) != 0 {
		t.Errorf("empty: %v %v", th, err)
	}
	for _, bad := range []string{"Threads_running", "Threads_running=", "=3", "x=-1", "x=abc", "a b=1", "x=1,X=2"} {
		if _, err := ParseThresholds(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
	ex := th.Exceeded(map[string]float64{"threads_running": 26, "threads_connected": 10})
	if ex != "Threads_running=26 > 25" {
		t.Errorf("Exceeded: %q", ex)
	}
	if ex := th.Exceeded(map[string]float64{"threads_running": 25, "threads_connected": 10}); ex != "" {
		t.Errorf("equal is not exceeding: %q", ex)
	}
	if ex := th.Exceeded(map[string]float64{"threads_running": 1}); !strings.Contains(ex, "Threads_connected unknown") {
		t.Errorf("missing variable: %q", ex)
	}
}

func TestParseAddr(t *testing.T) {
	for in, want := range map[string]string{"127.0.0.1:13307": "127.0.0.1 13307", "db2": "db2 3306", "[::1]:3307": "::1 3307"} {
		h, p, err := ParseAddr(in)
		if err != nil || h+" "+itoa(p) != want {
			t.Errorf("%q: %s %d %v", in, h, p, err)
		}
	}
	for _, bad := range []string{"h:x", "h:0", ":3306", "a:b:c"} {
		if _, _, err := ParseAddr(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// fakeReplica returns a replica whose lag and error the test sets.
type fakeReplica struct {
	mu  sync.Mutex
	lag time.Duration
	err error
}

func (f *fakeReplica) set(lag time.Duration, err error) {
	f.mu.Lock()
	f.lag, f.err = lag, err
	f.mu.Unlock()
}

func (f *fakeReplica) replica(name string) Replica {
	return Replica{Name: name, Lag: func(context.Context) (time.Duration, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.lag, f.err
	}}
}

type fakeLoad struct {
	mu   sync.Mutex
	vals map[string]float64
	err  error
}

func (f *fakeLoad) set(vals map[string]float64, err error) {
	f.mu.Lock()
	f.vals, f.err = vals, err
	f.mu.Unlock()
}

func (f *fakeLoad) read(_ context.Context, names []string) (map[string]float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	out := map[string]float64{}
	for _, n := range names {
		if v, ok := f.vals[n]; ok {
			out[n] = v
		}
	}
	return out, nil
}

func run(t *testing.T, cfg Config) *Throttler {
	t.Helper()
	cfg.Interval, cfg.LoadInterval = 5*time.Millisecond, 5*time.Millisecond
	th := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { th.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return th
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestPauseResumeWait(t *testing.T) {
	th := run(t, Config{})
	if ok, _ := th.Throttled(); ok {
		t.Fatal("throttled with nothing to watch")
	}
	th.Pause()
	if ok, reason := th.Throttled(); !ok || reason != "paused by operator" {
		t.Fatalf("after Pause: %v %q", ok, reason)
	}
	released := make(chan error, 1)
	go func() { released <- th.Wait(context.Background()) }()
	select {
	case err := <-released:
		t.Fatalf("Wait returned while paused: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	th.Resume()
	select {
	case err := <-released:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		t.Fatal("Wait did not return after Resume")
	}
	// Wait returns the context's cause when it ends first.
	th.Pause()
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("stop")
	cancel(cause)
	if err := th.Wait(ctx); !errors.Is(err, cause) {
		t.Fatalf("Wait on a cancelled context: %v", err)
	}
	if st := th.State(); !st.Paused || st.ThrottledFor <= 0 {
		t.Fatalf("state: %+v", st)
	}
}

func TestFlagFiles(t *testing.T) {
	dir := t.TempDir()
	flag, panicFile := filepath.Join(dir, "throttle"), filepath.Join(dir, "panic")
	var aborts atomic.Int32
	var abortErr atomic.Value
	th := run(t, Config{FlagFile: flag, PanicFile: panicFile, Abort: func(err error) {
		aborts.Add(1)
		abortErr.Store(err)
	}})
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "throttled by the flag file", func() bool {
		ok, reason := th.Throttled()
		return ok && strings.Contains(reason, "throttle flag file "+flag)
	})
	os.Remove(flag)
	eventually(t, "flag file removed", func() bool { ok, _ := th.Throttled(); return !ok })
	if aborts.Load() != 0 {
		t.Fatal("aborted without a panic file")
	}
	if err := os.WriteFile(panicFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "abort on the panic file", func() bool { return aborts.Load() > 0 })
	time.Sleep(30 * time.Millisecond)
	if n := aborts.Load(); n != 1 {
		t.Fatalf("Abort called %d times", n)
	}
	if err := abortErr.Load().(error); !errors.Is(err, ErrAbort) || !strings.Contains(err.Error(), "panic flag file") {
		t.Fatalf("abort error: %v", err)
	}
}

func TestMaxLoad(t *testing.T) {
	load := &fakeLoad{vals: map[string]float64{"threads_running": 3}}
	maxLoad, _ := ParseThresholds("Threads_running=10")
	th := run(t, Config{Load: load.read, MaxLoad: maxLoad})
	if ok, r := th.Throttled(); ok {
		t.Fatalf("throttled under the limit: %s", r)
	}
	load.set(map[string]float64{"threads_running": 11}, nil)
	eventually(t, "max-load throttles", func() bool {
		ok, reason := th.Throttled()
		return ok && reason == "max-load Threads_running=11 > 10"
	})
	load.set(map[string]float64{"threads_running": 10}, nil)
	eventually(t, "max-load lifts", func() bool { ok, _ := th.Throttled(); return !ok })

	// An unreadable status fails closed.
	load.set(nil, errors.New("gone away"))
	eventually(t, "unreadable load throttles", func() bool {
		ok, reason := th.Throttled()
		return ok && strings.Contains(reason, "cannot read the primary's status: gone away")
	})
	load.set(map[string]float64{"threads_running": 1}, nil)
	eventually(t, "readable again", func() bool { ok, _ := th.Throttled(); return !ok })

	// Changed at run time, including a new variable.
	next, _ := ParseThresholds("Threads_running=0,Threads_connected=5")
	th.SetMaxLoad(next)
	eventually(t, "new thresholds apply", func() bool {
		ok, reason := th.Throttled()
		return ok && strings.Contains(reason, "Threads_running=1 > 0") && strings.Contains(reason, "Threads_connected unknown to the server")
	})
	if got := th.State().MaxLoad.String(); got != next.String() {
		t.Fatalf("state MaxLoad %q", got)
	}
}

func TestCriticalLoadGrace(t *testing.T) {
	load := &fakeLoad{vals: map[string]float64{"threads_running": 200}}
	critical, _ := ParseThresholds("Threads_running=100")
	aborted := make(chan error, 4)
	start := time.Now()
	run(t, Config{Load: load.read, CriticalLoad: critical, CriticalLoadGrace: 150 * time.Millisecond, Abort: func(err error) { aborted <- err }})
	select {
	case err := <-aborted:
		if took := time.Since(start); took < 150*time.Millisecond {
			t.Fatalf("aborted after %s, before the grace period", took)
		}
		if !errors.Is(err, ErrAbort) || !strings.Contains(err.Error(), "critical load Threads_running=200 > 100") {
			t.Fatalf("abort error: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no abort")
	}

	// A critical load that ends within the grace period does not abort.
	load2 := &fakeLoad{vals: map[string]float64{"threads_running": 200}}
	aborted2 := make(chan error, 1)
	th := run(t, Config{Load: load2.read, CriticalLoad: critical, CriticalLoadGrace: time.Second, Abort: func(err error) { aborted2 <- err }})
	eventually(t, "critical load seen", func() bool { return !th.State().CriticalSince.IsZero() })
	load2.set(map[string]float64{"threads_running": 5}, nil)
	eventually(t, "critical load over", func() bool { return th.State().CriticalSince.IsZero() })
	select {
	case err := <-aborted2:
		t.Fatalf("aborted: %v", err)
	case <-time.After(1200 * time.Millisecond):
	}
}

func TestReplicaLag(t *testing.T) {
	r1, r2 := &fakeReplica{}, &fakeReplica{}
	th := run(t, Config{Replicas: []Replica{r1.replica("r1:3306"), r2.replica("r2:3306")}, MaxLag: time.Second})
	if ok, r := th.Throttled(); ok {
		t.Fatalf("throttled: %s", r)
	}
	r2.set(1500*time.Millisecond, nil)
	eventually(t, "lag throttles", func() bool {
		ok, reason := th.Throttled()
		return ok && reason == "replica lag: r2:3306 1.5s > 1s"
	})
	st := th.State()
	if len(st.Replicas) != 2 || st.Replicas[0].Lagging || !st.Replicas[1].Lagging || st.Replicas[1].Lag != 1500*time.Millisecond {
		t.Fatalf("replicas: %+v", st.Replicas)
	}
	r2.set(0, nil)
	eventually(t, "lag lifts", func() bool { ok, _ := th.Throttled(); return !ok })

	// Unreadable counts as lagging, with the reason.
	r1.set(0, errors.New("Access denied"))
	eventually(t, "unreadable throttles", func() bool {
		ok, reason := th.Throttled()
		return ok && reason == "replica lag: r1:3306 unreadable (Access denied)"
	})
	// --max-lag 0 ignores the replicas.
	th.SetMaxLag(0)
	if ok, r := th.Throttled(); ok {
		t.Fatalf("max-lag 0 still throttles: %s", r)
	}
	th.SetMaxLag(time.Second)
	r1.set(0, nil)
	eventually(t, "readable again", func() bool { ok, _ := th.Throttled(); return !ok })
}

func TestReplicaNoAnswer(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	slow := Replica{Name: "slow:1", Lag: func(ctx context.Context) (time.Duration, error) {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-block:
			return 0, nil
		}
	}}
	cfg := Config{Replicas: []Replica{slow}, MaxLag: time.Second, ReadTimeout: 30 * time.Millisecond}
	th := run(t, cfg)
	eventually(t, "a replica that does not answer counts as lagging", func() bool {
		ok, reason := th.Throttled()
		return ok && reason == "replica lag: slow:1 unreadable (no answer within 30ms)"
	})
}

func TestApplierDelay(t *testing.T) {
	r := &fakeReplica{}
	th := New(Config{Replicas: []Replica{r.replica("r:1")}, MaxLag: time.Second})
	ctx := context.Background()
	step := func(lag time.Duration) {
		r.set(lag, nil)
		th.readReplica(ctx, 0)
		th.Evaluate()
	}
	// Lag over the limit but not growing: no delay.
	for range 3 {
		step(2 * time.Second)
	}
	if d := th.ApplierDelay(); d != 0 {
		t.Fatalf("delay %s without growth", d)
	}
	// Growing for more than a second: the delay rises, capped at a
	// quarter of the excess.
	lag := 2 * time.Second
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		lag += 50 * time.Millisecond
		step(lag)
		time.Sleep(20 * time.Millisecond)
	}
	d := th.ApplierDelay()
	if d <= 0 || d > (lag-time.Second)/4 {
		t.Fatalf("delay %s at lag %s", d, lag)
	}
	if th.State().ApplierDelay != d {
		t.Fatal("state does not show the delay")
	}
	// Under the limit: it decays to 0.
	for range 20 {
		step(100 * time.Millisecond)
	}
	if d := th.ApplierDelay(); d != 0 {
		t.Fatalf("delay %s after the lag went away", d)
	}
}

func TestHeartbeatLagOf(t *testing.T) {
	now := time.Unix(1000, 0)
	h := &Heartbeat{now: func() time.Time { return now }}
	if got := h.LagOf(5); got != 0 {
		t.Fatalf("nothing written: %s", got)
	}
	h.first = now
	now = now.Add(300 * time.Millisecond)
	if got := h.LagOf(5); got != 300*time.Millisecond {
		t.Fatalf("first beat not committed yet: %s", got)
	}
	t0 := time.Unix(1000, 0)
	for i := int64(0); i < 10; i++ {
		h.record(100+i, t0.Add(time.Duration(i)*100*time.Millisecond)) // beats 100..109
	}
	now = t0.Add(950 * time.Millisecond)
	cases := map[int64]time.Duration{
		109: 0,                      // the newest: current
		200: 0,                      // ahead of what was recorded (commit not returned yet)
		108: 50 * time.Millisecond,  // lacks 109, committed at 900ms
		104: 450 * time.Millisecond, // lacks 105, committed at 500ms
		42:  950 * time.Millisecond, // a previous run's row: lacks all of this run's beats
	}
	for seq, want := range cases {
		if got := h.LagOf(seq); got != want {
			t.Errorf("LagOf(%d) = %s, want %s", seq, got, want)
		}
	}
	// A missing beat (a write whose outcome was unknown) is skipped.
	h.record(111, t0.Add(1100*time.Millisecond))
	now = t0.Add(1200 * time.Millisecond)
	if got := h.LagOf(110); got != 100*time.Millisecond {
		t.Errorf("LagOf(110) = %s", got)
	}
	for i := int64(0); i < keepBeats+10; i++ {
		h.record(1000+i, now)
	}
	if len(h.beats) != keepBeats {
		t.Errorf("remembered %d beats", len(h.beats))
	}
}

// TestWaitReads: replica lag alone holds Wait but not WaitReads; another
// reason (the operator's pause) holds both, and WaitReads returns once only
// the lag is left.
func TestWaitReads(t *testing.T) {
	r := &fakeReplica{}
	th := run(t, Config{Replicas: []Replica{r.replica("r:3306")}, MaxLag: time.Second})
	r.set(2*time.Second, nil)
	eventually(t, "lag throttles", func() bool { ok, _ := th.Throttled(); return ok })
	if !th.State().LagOnly {
		t.Fatalf("state: %+v, want LagOnly", th.State())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := th.WaitReads(ctx); err != nil {
		t.Fatalf("WaitReads held by lag alone: %v", err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancelShort()
	if err := th.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait under lag: %v, want it held until its context ended", err)
	}

	th.Pause()
	if st := th.State(); st.LagOnly || !st.Throttled {
		t.Fatalf("paused and lagging: %+v", st)
	}
	released := make(chan error, 1)
	go func() { released <- th.WaitReads(ctx) }()
	select {
	case err := <-released:
		t.Fatalf("WaitReads returned while paused: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	th.Resume() // the lag remains: Wait holds, WaitReads goes
	select {
	case err := <-released:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("WaitReads did not return when only the lag was left")
	}
	if ok, reason := th.Throttled(); !ok || !strings.HasPrefix(reason, "replica lag") {
		t.Fatalf("after Resume: %v %q, want the lag still throttling", ok, reason)
	}
}
