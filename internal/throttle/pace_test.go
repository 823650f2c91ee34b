package throttle

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestNextDuty(t *testing.T) {
	base := 2 * time.Millisecond
	for _, c := range []struct {
		name    string
		duty    float64
		latency time.Duration
		clean   bool // tailClean
		want    float64
	}{
		{"above the limit: cut", 0.5, 5 * time.Millisecond, false, 0.3},
		{"above the limit, a clean tail: cut", 0.5, 5 * time.Millisecond, true, 0.3},
		{"cut stops at the floor", minDuty * 1.5, time.Second, false, minDuty},
		{"well below: grow by 5 %", 0.5, 2 * time.Millisecond, true, 0.525},
		{"well below, low duty: grow by 5 %", 0.02, 2 * time.Millisecond, true, 0.021},
		{"well below, 0.2: grow by 5 %", 0.2, 2 * time.Millisecond, true, 0.21},
		{"well below, the tail not clean: keep", 0.2, 2 * time.Millisecond, false, 0.2},
		{"growth stops at 1", 0.97, 1 * time.Millisecond, true, 1},
		{"between 75 % and 100 % of the limit: keep", 0.4, 3500 * time.Microsecond, true, 0.4},
		{"exactly the limit: keep", 0.4, 4 * time.Millisecond, true, 0.4},
	} {
		if got := nextDuty(c.duty, c.latency, base, 2, c.clean); diff(got, c.want) > 1e-9 {
			t.Errorf("%s: nextDuty(%v, %v, %v, 2, %v) = %v, want %v", c.name, c.duty, c.latency, base, c.clean, got, c.want)
		}
	}
}

// probesEvery returns n probes of fast, every k-th of them slow.
func probesEvery(n, k int, fast, slow time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = fast
		if k > 0 && i%k == k-1 {
			out[i] = slow
		}
	}
	return out
}

func TestTailClean(t *testing.T) {
	ms := time.Millisecond
	limit := 4 * ms
	base := probesEvery(100, 10, ms, 20*ms) // 10 % over the limit without the copy
	for _, c := range []struct {
		name    string
		slowest time.Duration
		window  []time.Duration
		base    []time.Duration
		want    bool
	}{
		{"the slowest within the limit", 4 * ms, probesEvery(100, 2, ms, 20*ms), base, true},
		{"a slow probe, as many slow ones as without the copy", 20 * ms, probesEvery(100, 10, ms, 20*ms), base, true},
		{"a slow probe, fewer slow ones than without the copy", 20 * ms, probesEvery(100, 20, ms, 20*ms), base, true},
		{"a slow probe, more slow ones than without the copy", 20 * ms, probesEvery(100, 8, ms, 20*ms), base, false},
		{"a slow probe, too few probes for a share", 20 * ms, probesEvery(shareMin-1, 10, ms, 20*ms), base, false},
		{"a slow probe, a baseline with none over the limit", 20 * ms, probesEvery(100, 50, ms, 20*ms), probesEvery(100, 0, ms, ms), false},
		{"a slow probe, no baseline probes", 20 * ms, probesEvery(100, 10, ms, 20*ms), nil, false},
	} {
		if got := tailClean(c.slowest, limit, c.window, c.base); got != c.want {
			t.Errorf("%s: tailClean = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestPacerGrowsThroughItsBaselineTail: a server whose own tail is wide
// (one probe in 20 ten times the baseline, so nearly every second has
// one over the limit) does not hold the duty at its floor while the copy
// leaves that tail as it was; when the copy doubles the slow probes, the
// duty does not grow.
func TestPacerGrowsThroughItsBaselineTail(t *testing.T) {
	for _, c := range []struct {
		name  string
		every int // one probe in every is slow during the copy
		grow  bool
	}{
		{"the tail as without the copy", 20, true},
		{"twice the slow probes", 10, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Now()
			p := NewPacer(PacerConfig{Ratio: 2, Probe: func(context.Context) error { return nil }})
			p.began, p.duty, p.base, p.probes, p.decided, p.rebased = true, 0.01, time.Millisecond, 1, t0, t0
			p.baseProbes = probesEvery(baselineKeep, 20, time.Millisecond, 10*time.Millisecond)
			probes := probesEvery(400, c.every, time.Millisecond, 10*time.Millisecond) // 20 s, before the next rebase
			for i, d := range probes {
				at := t0.Add(time.Duration(i+1) * 50 * time.Millisecond)
				p.pauseForAt(time.Millisecond, at) // chunks run
				p.observe(d, at)
			}
			if grew := p.duty > 0.01*1.5; grew != c.grow {
				t.Errorf("duty %v from 0.01 after 20 s, grown %v, want %v", p.duty, grew, c.grow)
			}
		})
	}
}

func diff(a, b float64) float64 {
	if a > b {
		return a - b
	}
	return b - a
}

func TestPauseFor(t *testing.T) {
	for _, c := range []struct {
		took time.Duration
		duty float64
		want time.Duration
	}{
		{100 * time.Millisecond, 1, 0},
		{100 * time.Millisecond, 0.5, 100 * time.Millisecond},
		{100 * time.Millisecond, 0.25, 300 * time.Millisecond},
		{100 * time.Millisecond, 0.001, maxPause}, // floor minDuty: 24.9 s, capped
		{0, 0.1, 0},
	} {
		if got := pauseFor(c.took, c.duty); got != c.want {
			t.Errorf("pauseFor(%v, %v) = %v, want %v", c.took, c.duty, got, c.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	if got := percentile(nil, 0.9); got != 0 {
		t.Errorf("percentile(nil) = %v", got)
	}
	if got := percentile(ms(10, 1, 9, 2, 8, 3, 7, 4, 6, 5), 0.9); got != 9*time.Millisecond {
		t.Errorf("p90 of 1..10 = %v, want 9ms", got)
	}
	if got := percentile(ms(3), 0.9); got != 3*time.Millisecond {
		t.Errorf("p90 of one = %v", got)
	}
	in := ms(5, 1, 3)
	percentile(in, 0.5)
	if in[0] != 5*time.Millisecond {
		t.Error("percentile sorted its input in place")
	}
}

// TestPacerFollowsLatency drives a Pacer with a fake probe whose latency
// the test sets: the baseline comes from the probes before Begin, the duty
// falls while the probe is slow and comes back once it is fast again.
func TestPacerFollowsLatency(t *testing.T) {
	var latency atomic.Int64
	latency.Store(int64(time.Millisecond))
	var probes atomic.Int64
	p := NewPacer(PacerConfig{Ratio: 2, Every: time.Millisecond, Probe: func(ctx context.Context) error {
		probes.Add(1)
		time.Sleep(time.Duration(latency.Load()))
		return nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	if p.Duty() != 1 {
		t.Fatalf("duty before Begin = %v, want 1 (not pacing)", p.Duty())
	}
	p.Begin(ctx)
	st := p.State()
	if st.Baseline < time.Millisecond || st.Baseline > 20*time.Millisecond {
		t.Fatalf("baseline %v from 1 ms probes", st.Baseline)
	}
	if d := p.Duty(); d != startDuty {
		t.Fatalf("duty after Begin = %v, want %v", d, startDuty)
	}
	waitFor(t, "the duty to fall to its floor under slow probes", func() bool {
		latency.Store(int64(10 * st.Baseline))
		return p.Duty() == minDuty
	})
	if d := pauseFor(10*time.Millisecond, p.Duty()); d < 2*time.Second {
		t.Errorf("a 10 ms chunk at duty %v pauses %v, want ≥ 2 s", p.Duty(), d)
	}
	latency.Store(int64(time.Millisecond))
	// No chunk runs (the copy is held by something else): the fast probes
	// say nothing about the copy, and the duty does not grow (the slow
	// probes still in the window may cut it once more).
	held := p.Duty()
	for n := probes.Load(); probes.Load() < n+5*decideEvery+recentKeep; {
		time.Sleep(time.Millisecond)
	}
	if d := p.Duty(); d > held {
		t.Fatalf("duty %v after fast probes with no chunk run, grown from %v", d, held)
	}
	waitFor(t, "the duty to recover under fast probes with chunks running", func() bool {
		p.PauseFor(time.Millisecond) // a chunk ended
		return p.Duty() == 1
	})
	cancel()
	<-done
	if probes.Load() < baselineMin {
		t.Errorf("%d probes", probes.Load())
	}
}

// TestPacerGrowsBetweenLongPauses: near the floor a thread sleeps seconds
// after each chunk (a 10 ms chunk at the floor: 2.5 s). Fast probes with no
// chunk ended for over a second are then the duty's own pause, not a hold by
// something else, and the duty grows; with no such pause given it does not.
func TestPacerGrowsBetweenLongPauses(t *testing.T) {
	for _, c := range []struct {
		name string
		took time.Duration // the last chunk's time (its pause at the floor follows)
		grow bool
	}{
		{"the floor's own pause", 10 * time.Millisecond, true},
		{"no pause given: held by something else", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Now()
			p := NewPacer(PacerConfig{Ratio: 2, Probe: func(context.Context) error { return nil }})
			p.began, p.duty, p.base, p.probes, p.decided, p.rebased = true, minDuty, time.Millisecond, 1, t0, t0
			pause := p.pauseForAt(c.took, t0)
			if c.took > 0 && pause < 2*time.Second {
				t.Fatalf("a %v chunk at the floor pauses %v, want over 2 s", c.took, pause)
			}
			// Fast probes from 1.1 s after the chunk ended to 2 s: within its pause.
			for at := 1100 * time.Millisecond; at <= 2*time.Second; at += 50 * time.Millisecond {
				p.observe(100*time.Microsecond, t0.Add(at))
			}
			if grew := p.duty > minDuty; grew != c.grow {
				t.Errorf("duty %v after fast probes (floor %v), grown %v, want %v", p.duty, minDuty, grew, c.grow)
			}
		})
	}
}

// TestPacerFailingProbe: a probe that fails counts as slow (fail closed).
func TestPacerFailingProbe(t *testing.T) {
	var fail atomic.Bool
	p := NewPacer(PacerConfig{Ratio: 3, Every: time.Millisecond, Probe: func(ctx context.Context) error {
		if fail.Load() {
			return errors.New("probe failed")
		}
		return nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	p.Begin(ctx)
	fail.Store(true)
	waitFor(t, "the duty to reach its floor", func() bool { return p.Duty() == minDuty })
	cancel()
	<-done
}

// TestPacerPauseEndsWithContext: a pause ends when ctx does.
func TestPacerPauseEndsWithContext(t *testing.T) {
	p := NewPacer(PacerConfig{Ratio: 2, Probe: func(context.Context) error { return nil }})
	p.began, p.duty = true, minDuty
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := p.Pause(ctx, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Pause = %v, want the context's error", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("Pause took %v after its context ended", time.Since(start))
	}
}

// TestPacerHoldsWhileIdle: with Active saying no, the copy runs at full
// duty and slow probes (the copy's own) do not cut the held duty; once the
// application shows up the duty applies and follows the probe again, and
// it takes idleAfter without activity to run unpaced again.
func TestPacerHoldsWhileIdle(t *testing.T) {
	p := NewPacer(PacerConfig{Ratio: 2, Probe: func(context.Context) error { return nil },
		Active: func(context.Context) (bool, error) { return false, nil }})
	t0 := time.Now()
	p.began, p.base, p.duty, p.decided, p.rebased, p.probes = true, time.Millisecond, 0.5, t0, t0, 1
	p.baseQuiet = true // as Begin leaves it before any activity was seen
	if p.idleAt(t0) {
		t.Fatal("idle before Active answered")
	}
	// Its first answers know little: idle only after idleMinPolls of them,
	// all no (then at once).
	for range idleMinPolls - 1 {
		p.noteActive(false, t0)
	}
	if p.idleAt(t0) {
		t.Fatalf("idle after %d answers", idleMinPolls-1)
	}
	p.noteActive(false, t0)
	if !p.idleAt(t0) {
		t.Fatalf("not idle after %d answers, all no", idleMinPolls)
	}
	now := t0
	appActive := false
	probe := func(d time.Duration, n int) {
		for range n {
			now = now.Add(50 * time.Millisecond)
			p.observe(d, now)
			if appActive {
				p.noteActive(true, now)
			}
		}
	}
	probe(10*time.Millisecond, 40)
	if p.duty != 0.5 {
		t.Fatalf("duty %v after slow probes while idle, want 0.5 held", p.duty)
	}
	p.noteActive(true, now)
	appActive = true
	if p.idleAt(now) {
		t.Fatal("idle right after Active said yes")
	}
	// The application is back: the copy is held while the baseline is
	// measured again (the probe at 2 ms without the copy).
	if !p.measuring {
		t.Fatal("no new baseline measured when the application came back")
	}
	if d := p.pauseForAt(10*time.Millisecond, now); d != measureFor {
		t.Fatalf("a chunk ending during the measurement pauses %v, want until its end", d)
	}
	probe(2*time.Millisecond, int(measureFor/(50*time.Millisecond))+1)
	if p.measuring || p.base != 2*time.Millisecond {
		t.Fatalf("after the measurement: measuring %v, baseline %v; want 2ms", p.measuring, p.base)
	}
	probe(3*time.Millisecond, 10) // within 2 × the new baseline: kept
	if p.duty != 0.5 {
		t.Fatalf("duty %v with the probe at 1.5 × its baseline, want 0.5 kept", p.duty)
	}
	probe(10*time.Millisecond, 10)
	if p.duty >= 0.5 {
		t.Fatalf("duty %v after slow probes while active, want it cut", p.duty)
	}
	if now.Sub(p.rebased) >= rebaseEvery {
		t.Fatal("the test ran into the periodic measurement")
	}
	held := p.duty
	activeAt := now
	p.noteActive(false, activeAt.Add(idleAfter-time.Millisecond))
	if p.idleAt(activeAt.Add(idleAfter - time.Millisecond)) {
		t.Fatal("idle before idleAfter without activity")
	}
	if !p.idleAt(activeAt.Add(idleAfter)) {
		t.Fatal("not idle idleAfter after the last activity")
	}
	p.lastActive = time.Now().Add(-idleAfter) // State and Duty read the clock
	if st := p.State(); !st.Idle || st.Duty != 1 || p.Duty() != 1 {
		t.Fatalf("state %+v, Duty %v while idle; want idle at duty 1", st, p.Duty())
	}
	if p.duty != held {
		t.Fatalf("held duty %v, want %v", p.duty, held)
	}
}

// TestPacerBeginIdle: Active is asked with every probe until it has
// answered idleMinPolls times, so that on an idle server Begin returns
// after baselineQuietMin probes with the copy unpaced from its first chunk
// (asked every activeEvery, Active had not answered enough by the time the
// baseline was taken, and the copy started paced); with the application
// active Begin still waits for baselineMin probes and the copy starts
// paced.
func TestPacerBeginIdle(t *testing.T) {
	for _, active := range []bool{false, true} {
		var polls atomic.Int32
		p := NewPacer(PacerConfig{Ratio: 2, Every: 20 * time.Millisecond,
			Probe: func(context.Context) error { return nil },
			Active: func(context.Context) (bool, error) {
				polls.Add(1)
				return active, nil
			}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); p.Run(ctx) }()
		p.Begin(ctx)
		p.mu.Lock()
		n := len(p.before)
		p.mu.Unlock()
		holding, duty := p.Holding(), p.Duty()
		cancel()
		<-done
		switch {
		case !active && (n >= baselineMin || n < baselineQuietMin):
			t.Errorf("idle: Begin returned after %d probes (%d answers), want %d to %d", n, polls.Load(), baselineQuietMin, baselineMin-1)
		case !active && (holding || duty != 1):
			t.Errorf("idle: the copy starts held (holding %v, duty %v)", holding, duty)
		case active && n < baselineMin:
			t.Errorf("active: Begin returned after %d probes, want %d", n, baselineMin)
		case active && (!holding || duty != startDuty):
			t.Errorf("active: holding %v, duty %v; want the copy paced at %v", holding, duty, startDuty)
		}
	}
}

// TestPacerNoAnswer: while Active cannot tell yet (ErrNoAnswer: MySQL's
// binlog reader still in the history before its start position), its
// answers do not count: the application is not called idle from them, the
// copy starts paced, and the warning for a failing Active is not logged.
// Once Active answers, idleMinPolls answers of no make it idle.
func TestPacerNoAnswer(t *testing.T) {
	var ready atomic.Bool
	var asked atomic.Int32
	var logs strings.Builder
	var mu sync.Mutex
	p := NewPacer(PacerConfig{Ratio: 2, Every: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Probe:  func(context.Context) error { return nil },
		Active: func(context.Context) (bool, error) {
			asked.Add(1)
			if !ready.Load() {
				return false, ErrNoAnswer
			}
			return false, nil
		}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	p.Begin(ctx)
	if !p.Holding() || p.Duty() != startDuty {
		t.Errorf("no answers yet: holding %v, duty %v; want the copy paced at %v", p.Holding(), p.Duty(), startDuty)
	}
	waitFor(t, "Active to be asked past idleAfter", func() bool { return asked.Load() > int32(idleAfter/(10*time.Millisecond))+idleMinPolls })
	if st := p.State(); st.Idle || p.hasPolled() {
		t.Errorf("idle %v, polled %v from no answers", st.Idle, p.hasPolled())
	}
	ready.Store(true)
	waitFor(t, "the idle state once Active answers", func() bool { return p.State().Idle && p.Duty() == 1 })
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logs.String(), "cannot tell") {
		t.Errorf("no answer was logged as a failing Active: %s", logs.String())
	}
}

// TestActivityNotReady: until the binlog reader counts the application
// (ready), activity answers ErrNoAnswer without asking the server (its
// pool is nil here: asking would fail the test).
func TestActivityNotReady(t *testing.T) {
	var ready atomic.Bool
	active := activity(nil, "", func() uint64 { return 1e6 }, ready.Load, slog.New(slog.DiscardHandler))
	for range 3 {
		if busy, err := active(context.Background()); busy || !errors.Is(err, ErrNoAnswer) {
			t.Fatalf("not ready: busy %v, err %v; want no answer", busy, err)
		}
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TestPacerActivity runs a Pacer whose probe is always slow: the duty is 1
// while Active says no, falls once it says yes or fails (an error counts as
// activity), and is 1 again idleAfter after the last yes.
func TestPacerActivity(t *testing.T) {
	var active, failing atomic.Bool
	var slow atomic.Bool
	var p *Pacer
	p = NewPacer(PacerConfig{Ratio: 2, Every: time.Millisecond,
		Probe: func(ctx context.Context) error {
			if slow.Load() && !p.State().Measuring { // the copy makes it slow; held, it is not
				time.Sleep(5 * time.Millisecond)
			}
			return nil
		},
		Active: func(context.Context) (bool, error) {
			if failing.Load() {
				return false, errors.New("processlist unreadable")
			}
			return active.Load(), nil
		}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	p.Begin(ctx)
	slow.Store(true)
	waitFor(t, "the idle state", func() bool { return p.State().Idle })
	time.Sleep(600 * time.Millisecond) // more than one decision period of slow probes
	if d := p.Duty(); d != 1 {
		t.Fatalf("duty %v while the application is idle, want 1", d)
	}
	active.Store(true)
	waitFor(t, "the duty to fall with the application active", func() bool { return p.Duty() < 0.2 })
	active.Store(false)
	waitFor(t, "the idle state again", func() bool { return p.Duty() == 1 && p.State().Idle })
	failing.Store(true)
	waitFor(t, "a failing Active to count as active", func() bool { return p.Duty() < 1 && !p.State().Idle })
	cancel()
	<-done
}

// TestPacerRebase: while the application is active the baseline is
// measured again every rebaseEvery, the copy held meanwhile. The
// measurement goes on while the probe is still falling (the copy's
// after-effects), up to measureMax; its settled probes join the pool the
// baseline is the p90 of, and it moves the baseline by at most maxRaise
// either way (unless the baseline was taken before the application was
// seen: then it replaces it); too few probes (slow ones) keep the old
// baseline.
func TestPacerRebase(t *testing.T) {
	p := NewPacer(PacerConfig{Ratio: 2, Probe: func(context.Context) error { return nil }})
	t0 := time.Now()
	p.began, p.base, p.duty, p.decided, p.rebased, p.probes, p.seen = true, time.Millisecond, 0.5, t0, t0, 1, true
	p.baseProbes = probesEvery(baselineKeep, 0, time.Millisecond, time.Millisecond)
	p.basePool = slices.Clone(p.baseProbes)
	now := t0.Add(rebaseEvery)
	measure := func(lat func(time.Duration) time.Duration) time.Duration {
		t.Helper()
		start := now
		p.observe(time.Millisecond, now)
		if !p.measuring {
			t.Fatal("no measurement rebaseEvery after the last")
		}
		for p.measuring {
			now = now.Add(50 * time.Millisecond)
			p.observe(lat(now.Sub(start)), now)
			if now.Sub(start) > measureMax+time.Second {
				t.Fatal("the measurement outlasted measureMax")
			}
		}
		if p.rebased != now {
			t.Fatalf("rebased %v, want %v", p.rebased, now)
		}
		return now.Sub(start)
	}
	// Flat at 4 ms against a 1 ms baseline taken with the application:
	// ends after measureFor. Its last 500 ms (10 probes) are a tenth of
	// the pool: the pool's p90 is still 1 ms.
	if held := measure(func(time.Duration) time.Duration { return 4 * time.Millisecond }); held > measureFor+100*time.Millisecond {
		t.Errorf("a flat measurement held the copy %v, want about %v", held, measureFor)
	}
	if p.base != time.Millisecond {
		t.Fatalf("baseline %v after one measurement of 4ms against a pool of 1ms, want 1ms", p.base)
	}
	// A second one: the pool's p90 is 4 ms, the raise limited to maxRaise.
	now = now.Add(rebaseEvery)
	measure(func(time.Duration) time.Duration { return 4 * time.Millisecond })
	if want := time.Duration(maxRaise * float64(time.Millisecond)); p.base != want {
		t.Fatalf("baseline %v after measuring 4ms twice against 1ms, want %v (raise limited)", p.base, want)
	}
	// ... and its probes are not the application's tail (tailClean).
	if len(p.baseProbes) != baselineKeep || slices.Max(p.baseProbes) != time.Millisecond {
		t.Fatalf("baseline probes replaced by a measurement whose raise was limited: %d, slowest %v", len(p.baseProbes), slices.Max(p.baseProbes))
	}
	// Falling from 8 ms by 1 ms every 500 ms down to 2 ms: the measurement
	// lasts until it stops falling; with a pool of its own probes only,
	// the baseline (4 ms) falls towards the settled 2 ms, by at most
	// maxRaise.
	p.base, p.basePool = 4*time.Millisecond, nil
	now = now.Add(rebaseEvery)
	held := measure(func(e time.Duration) time.Duration {
		return max(8*time.Millisecond-time.Duration(e/(500*time.Millisecond))*time.Millisecond, 2*time.Millisecond)
	})
	if held < 3*time.Second || held > measureMax {
		t.Errorf("a falling measurement held the copy %v, want until it settles (≥ 3s, ≤ %v)", held, measureMax)
	}
	if want := time.Duration(float64(4*time.Millisecond) / maxRaise); p.base != want {
		t.Fatalf("baseline %v after the probe settled at 2ms, want %v (4ms lowered by at most maxRaise)", p.base, want)
	}
	if len(p.basePool) != int(measureStep/(50*time.Millisecond)) || slices.Max(p.basePool) != 2*time.Millisecond {
		t.Fatalf("pool after a falling measurement: %v, want its settled last %v only", p.basePool, measureStep)
	}
	// ... and its probes join the earlier baseline's, the last baselineKeep kept.
	if n := len(p.baseProbes); n != baselineKeep || p.baseProbes[0] != time.Millisecond || p.baseProbes[n-1] != 2*time.Millisecond ||
		slices.Max(p.baseProbes) != 8*time.Millisecond-time.Duration(measureSettle/(500*time.Millisecond))*time.Millisecond {
		t.Fatalf("baseline probes after a measurement: %d, first %v, last %v, slowest %v", n, p.baseProbes[0], p.baseProbes[n-1], slices.Max(p.baseProbes))
	}
	// Falling all the time (30 % per 500 ms): ends at measureMax.
	now = now.Add(rebaseEvery)
	if held := measure(func(e time.Duration) time.Duration { return time.Duration(1e8 * math.Pow(0.7, e.Seconds()/0.5)) }); held < measureMax || held > measureMax+100*time.Millisecond {
		t.Errorf("an ever-falling measurement held the copy %v, want %v", held, measureMax)
	}
	// A baseline taken on a quiet server: the first measurement with the
	// application replaces it whole.
	p.base, p.baseQuiet = time.Millisecond, true
	now = now.Add(rebaseEvery)
	measure(func(time.Duration) time.Duration { return 4 * time.Millisecond })
	if p.base != 4*time.Millisecond || p.baseQuiet {
		t.Fatalf("baseline %v (quiet %v) after measuring 4ms against a quiet 1ms, want 4ms taken with the application", p.base, p.baseQuiet)
	}
	if slices.Min(p.baseProbes) != 4*time.Millisecond {
		t.Fatalf("a quiet baseline's probes kept after a measurement with the application: fastest %v", slices.Min(p.baseProbes))
	}
	now = now.Add(rebaseEvery)
	p.observe(time.Millisecond, now) // starts the next
	now = now.Add(measureFor)
	p.observe(time.Second, now) // one slow probe: too few samples
	if p.measuring || p.base != 4*time.Millisecond {
		t.Fatalf("measuring %v, baseline %v after a measurement with one probe; want 4ms kept", p.measuring, p.base)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestActivityWindow: a trickle of application rows events or a session
// seen once is not a load; rows events at 25/s over the window's time (50
// in 8 polls 250 ms apart), at least activeRowsMin of them, or two
// sightings within the last 8 polls are, and they age out of the window.
// Polls closer together (the pacer's first ones) need proportionally fewer
// events.
func TestActivityWindow(t *testing.T) {
	var w activityWindowState
	counter := uint64(1000)
	now := time.Unix(1e9, 0)
	every := activeEvery
	poll := func(events uint64, session bool) bool {
		counter += events
		now = now.Add(every)
		return w.add(now, counter, session)
	}
	if poll(0, false) {
		t.Fatal("first poll: the counter's past counts as activity")
	}
	for i := range 20 { // a heartbeat: 5 rows events a poll (20/s)
		if poll(5, false) {
			t.Fatalf("poll %d: a 20/s heartbeat counted as the application", i)
		}
	}
	if poll(0, true) {
		t.Fatal("one session seen once counted as a load")
	}
	if !poll(0, true) {
		t.Fatal("a session seen in two polls of the window: not active")
	}
	for i := range activityWindow - 2 {
		if !poll(0, false) {
			t.Fatalf("poll %d after the sightings: both are in the window, yet not active", i)
		}
	}
	if poll(0, false) {
		t.Fatal("a sighting older than the window still counts")
	}
	if !poll(50, false) { // 25/s over the window's 2 s
		t.Fatal("50 rows events in one poll of a 2 s window: not active")
	}
	for range activityWindow - 1 {
		if !poll(0, false) {
			t.Fatal("the rows events left the window too early")
		}
	}
	if poll(0, false) {
		t.Fatal("the rows events did not leave the window")
	}
	if poll(0, false) || w.add(now.Add(every), counter-10, false) {
		t.Fatal("a counter that went back (a new stream) counted as activity")
	}

	// The pacer's first polls, 50 ms apart, on a fresh window.
	every = 50 * time.Millisecond
	w = activityWindowState{}
	poll(0, false)
	for i := range 3 * activityWindow { // a heartbeat at 20/s: one event a poll
		if poll(1, false) {
			t.Fatalf("fast poll %d: a 20/s heartbeat counted as the application", i)
		}
	}
	w = activityWindowState{}
	poll(0, false)
	if !poll(activeRowsMin, false) {
		t.Fatalf("%d rows events in the first 50 ms (160/s): not active", activeRowsMin)
	}
	w = activityWindowState{}
	poll(0, false)
	if poll(activeRowsMin-1, false) {
		t.Fatalf("%d rows events, fewer than activeRowsMin, counted as a load", activeRowsMin-1)
	}
}

// TestSessionLoad: a session seen running counts as the application's load
// unless it is a short write (judged by its rows events instead): INSERT,
// UPDATE, DELETE, REPLACE or COMMIT, after comments and whitespace, running
// for less than a second.
func TestSessionLoad(t *testing.T) {
	for _, c := range []struct {
		stmt string
		secs int64
		load bool
	}{
		{"INSERT INTO bench_meta.heartbeat (id, ts) VALUES (1, NOW(6)) ON DUPLICATE KEY UPDATE ts = VALUES(ts)", 0, false},
		{"  /* app */ update t SET a = 1", 0, false},
		{"-- x\n# y\ndelete from t", 0, false},
		{"(REPLACE INTO t VALUES (1))", 0, false},
		{"COMMIT", 0, false},
		{"INSERT INTO t SELECT * FROM u", 1, true}, // a batch: its rows reach the binlog at its commit
		{"SELECT * FROM t", 0, true},
		{"select sleep(1)", 0, true},
		{"/* unterminated comment INSERT", 0, true},
		{"INSERTED", 0, true},
		{"", 0, true}, // INFO NULL: Execute/Fetch of an unknown statement
		{"WITH x AS (SELECT 1) SELECT * FROM x", 0, true},
	} {
		if got := (ActiveSession{Statement: c.stmt, Seconds: c.secs}).load(); got != c.load {
			t.Errorf("%q running %d s: load %v, want %v", c.stmt, c.secs, got, c.load)
		}
	}
}

// TestPacerBaselineNoRatchet: with the application's latency the same
// before and during the copy, measuring the baseline again every minute
// keeps it near the p90 before the copy. Each measurement's last 500 ms
// (10 probes) miss the tail about half the time; taken as the baseline
// alone, with raises limited and falls not, they ratcheted it down to the
// fast probes' latency within a few minutes (session 23's bench, heavy
// load: 2.42 ms before the copy, 1.16 ms after the first measurement, the
// copy at its floor for an hour).
func TestPacerBaselineNoRatchet(t *testing.T) {
	const fast, slow = time.Millisecond, 2400 * time.Microsecond
	rng := rand.New(rand.NewPCG(23, 1))
	draw := func() time.Duration { // 15 % slow: p90 2.4 ms
		if rng.Float64() < 0.15 {
			return slow
		}
		return fast
	}
	p := NewPacer(PacerConfig{Ratio: 1.5, Probe: func(context.Context) error { return nil }})
	t0 := time.Now()
	p.probes, p.seen, p.lastActive = 1, true, t0
	for range baselineKeep {
		p.before = append(p.before, draw())
	}
	for percentile(p.before, 0.9) != slow { // a pre-copy sample whose p90 is the distribution's
		p.before = append(p.before[1:], draw())
	}
	p.began, p.base, p.duty, p.decided, p.rebased = true, slow, 0.5, t0, t0
	p.baseProbes, p.basePool = slices.Clone(p.before), slices.Clone(p.before)
	now := t0
	lowest, lowWindows := p.base, 0
	for m := range 30 {
		now = now.Add(rebaseEvery)
		p.observe(draw(), now)
		if !p.measuring {
			t.Fatalf("measurement %d did not start", m)
		}
		start := now
		for p.measuring {
			now = now.Add(50 * time.Millisecond)
			p.observe(draw(), now)
		}
		if percentile(p.measuredSince(now.Add(-measureStep), now), 0.9) == fast {
			lowWindows++
		}
		if now.Sub(start) > measureMax+time.Second {
			t.Fatal("a measurement outlasted measureMax")
		}
		lowest = min(lowest, p.base)
	}
	if lowWindows < 5 {
		t.Fatalf("only %d of 30 measurements' last 500 ms had a p90 of the fast probes: the test does not exercise the ratchet", lowWindows)
	}
	if floor := time.Duration(float64(slow) / maxRaise); lowest < floor || p.base > slow {
		t.Errorf("baseline fell to %v (now %v) over 30 measurements of the same latency, want ≥ %v and ≤ %v", lowest, p.base, floor, slow)
	}
}

// TestPacerBaselineAnchored: measurements whose probes stay slower than
// before the copy (its after-effects, the applier's writes, which no
// measurement holds) raise the baseline by maxRaise each, but never above
// maxDrift × the baseline taken before the copy: on session 32's bench
// seven of them took it ×1.85 and the copy's rate ×4.8 under a constant
// load. A baseline taken on a quiet server is replaced whole, and the
// replacement is the new anchor.
func TestPacerBaselineAnchored(t *testing.T) {
	const before, after = 2 * time.Millisecond, 4 * time.Millisecond
	run := func(p *Pacer, t0 time.Time, n int, d time.Duration) time.Time {
		now := t0
		for m := range n {
			now = now.Add(rebaseEvery)
			p.observe(d, now)
			if !p.measuring {
				t.Fatalf("measurement %d did not start", m)
			}
			for p.measuring {
				now = now.Add(50 * time.Millisecond)
				p.observe(d, now)
			}
		}
		return now
	}
	p := NewPacer(PacerConfig{Ratio: 1.5, Probe: func(context.Context) error { return nil }})
	t0 := time.Now()
	p.probes, p.seen, p.lastActive, p.polled, p.answers = 1, true, t0, true, idleMinPolls
	for range baselineKeep {
		p.before = append(p.before, before)
	}
	p.Begin(context.Background())
	if p.base != before || p.anchor != before || p.baseQuiet {
		t.Fatalf("Begin: baseline %v, anchor %v, quiet %v; want %v, %v, false", p.base, p.anchor, p.baseQuiet, before, before)
	}
	p.decided, p.rebased = t0, t0
	now := run(p, t0, 10, after)
	if ceiling := time.Duration(maxDrift * float64(before)); p.base > ceiling || p.base >= after || p.base < before {
		t.Errorf("after 10 measurements at %v the baseline is %v: want between %v and %v (maxDrift over the pre-copy %v)", after, p.base, before, ceiling, before)
	}
	// Begun, Begin returns at once and keeps the baseline (the checksum
	// calls it for a run resumed after its copy).
	was := p.base
	p.Begin(context.Background())
	if p.base != was {
		t.Errorf("Begin again reset the baseline from %v to %v", was, p.base)
	}
	// It falls again as the pool fills with faster probes (by maxRaise a
	// measurement at most).
	run(p, now, 12, time.Millisecond)
	if p.base >= before {
		t.Errorf("after 12 measurements at 1ms the baseline is still %v", p.base)
	}

	// Quiet: the first measurement with the application replaces the
	// baseline whole, and anchors it there.
	q := NewPacer(PacerConfig{Ratio: 1.5, Probe: func(context.Context) error { return nil }})
	q.probes, q.polled, q.answers = 1, true, idleMinPolls
	for range baselineKeep {
		q.before = append(q.before, 500*time.Microsecond)
	}
	q.Begin(context.Background())
	if !q.baseQuiet {
		t.Fatal("a baseline taken before any application activity is not quiet")
	}
	q.seen, q.lastActive, q.decided, q.rebased = true, t0, t0, t0
	run(q, t0, 1, before)
	if q.base != before || q.anchor != before {
		t.Errorf("the quiet baseline replaced: %v, anchor %v; want %v", q.base, q.anchor, before)
	}
	run(q, t0.Add(2*rebaseEvery), 10, after)
	if ceiling := time.Duration(maxDrift * float64(before)); q.base > ceiling || q.base >= after || q.base < before {
		t.Errorf("re-anchored at %v, the baseline rose to %v (ceiling %v)", before, q.base, ceiling)
	}
}
