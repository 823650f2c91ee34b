// Package throttle decides when a migration's row copy must pause, and when
// the migration must give up, from what it watches on the servers and on the
// local disk:
//
//   - an operator's pause (live control), and a throttle flag file;
//   - --max-load: global status variables of the primary above a threshold;
//   - --max-lag: replica lag, measured with a heartbeat row (heartbeat.go) —
//     a replica whose lag cannot be read counts as lagging (fail closed);
//   - --critical-load: status variables above a threshold for longer than a
//     grace period abort the migration; so does a panic flag file.
//
// The copier asks Wait before each chunk. The binlog applier is not paused
// (its backlog would only grow), but when the replicas lag and their lag
// keeps growing while the copy is paused — the applier's writes alone are
// more than they can absorb — ApplierDelay asks the flusher to wait between
// windows, scaled to the excess.
package throttle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Replica is a server whose lag is watched.
type Replica struct {
	Name string // host:port, for messages
	Lag  func(ctx context.Context) (time.Duration, error)
}

// Config says what to watch.
type Config struct {
	// Load reads the primary's status variables (nil: no load checks).
	Load         LoadReader
	MaxLoad      Thresholds
	CriticalLoad Thresholds
	// CriticalLoadGrace: a critical load must persist this long to abort
	// (0: the first reading aborts).
	CriticalLoadGrace time.Duration

	Replicas []Replica
	// MaxLag: the copy pauses while a replica lags more (0: lag ignored).
	MaxLag time.Duration

	// Checks are further sources (QueryCheck, HTTPCheck), each polled on
	// its own.
	Checks []Check

	// FlagFile: the copy pauses while it exists. PanicFile: the migration
	// aborts when it appears.
	FlagFile, PanicFile string

	// Interval between checks of the replicas and the flag files (100 ms);
	// LoadInterval between reads of the status variables (250 ms).
	Interval, LoadInterval time.Duration
	// ReadTimeout bounds one lag read; a replica that does not answer
	// within it counts as lagging (default 1 s).
	ReadTimeout time.Duration

	// LogEvery: a throttled period whose reason is of the same kind as the
	// last one logged is logged at most this often (30 s); its end is
	// logged only when its start was.
	LogEvery time.Duration

	// Abort is called once, with the reason, when the migration must stop.
	Abort  func(error)
	Logger *slog.Logger
}

// ErrAbort wraps the reasons Abort is called with.
var ErrAbort = errors.New("aborted")

// ReplicaLag is one replica's last reading.
type ReplicaLag struct {
	Name    string
	Lag     time.Duration // valid when Err == ""
	Err     string        // why the lag cannot be read
	Lagging bool
	At      time.Time // when it was read
}

// State is the throttle's current decision and what it was based on.
type State struct {
	Throttled bool
	Reason    string // all reasons, "; "-separated
	Since     time.Time
	Paused    bool // by the operator
	// LagOnly: throttled by replica lag alone (WaitReads passes).
	LagOnly bool
	// ThrottledFor is the total time throttled so far, current period included.
	ThrottledFor time.Duration
	Replicas     []ReplicaLag
	Load         map[string]float64
	LoadErr      string
	// CriticalSince is when the current critical load began (zero: none).
	CriticalSince time.Time
	ApplierDelay  time.Duration

	MaxLag       time.Duration
	MaxLoad      Thresholds
	CriticalLoad Thresholds
}

// Throttler watches and decides; see the package comment.
type Throttler struct {
	cfg Config
	log *slog.Logger

	maxLag       atomic.Int64
	maxLoad      atomic.Pointer[Thresholds]
	criticalLoad atomic.Pointer[Thresholds]
	paused       atomic.Bool

	mu        sync.Mutex
	state     State
	changed   chan struct{} // closed and replaced whenever Throttled or LagOnly changes
	lags      []ReplicaLag  // per replica, index as cfg.Replicas
	checks    []string      // per check, index as cfg.Checks: its last reason
	load      map[string]float64
	loadErr   error
	loadAsked map[string]bool // the names the last read asked for
	total     time.Duration   // throttled time of finished periods
	lagHist   []lagSample     // recent maximum lags, for the applier delay
	aborted   bool
	delay     atomic.Int64
	lastWarn  map[string]time.Time
	logs      *stateLog
}

type lagSample struct {
	at  time.Time
	lag time.Duration
}

// New returns a Throttler; Run starts watching.
func New(cfg Config) *Throttler {
	if cfg.Interval <= 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	if cfg.LoadInterval <= 0 {
		cfg.LoadInterval = 250 * time.Millisecond
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Abort == nil {
		cfg.Abort = func(error) {}
	}
	t := &Throttler{cfg: cfg, log: cfg.Logger, changed: make(chan struct{}), lastWarn: map[string]time.Time{}, logs: newStateLog(cfg.LogEvery)}
	t.maxLag.Store(int64(cfg.MaxLag))
	ml, cl := cfg.MaxLoad, cfg.CriticalLoad
	t.maxLoad.Store(&ml)
	t.criticalLoad.Store(&cl)
	t.checks = make([]string, len(cfg.Checks))
	for i, c := range cfg.Checks {
		t.checks[i] = c.Name + ": not checked yet"
	}
	t.lags = make([]ReplicaLag, len(cfg.Replicas))
	for i, r := range cfg.Replicas {
		t.lags[i] = ReplicaLag{Name: r.Name, Err: "not read yet", Lagging: true}
	}
	return t
}

// Run watches until ctx ends. It reads every replica and the load once
// before the first decision, then keeps polling in the background.
func (t *Throttler) Run(ctx context.Context) {
	t.Prime(ctx)
	var wg sync.WaitGroup
	for i := range t.cfg.Replicas {
		wg.Add(1)
		go func() { defer wg.Done(); t.poll(ctx, t.cfg.Interval, func() { t.readReplica(ctx, i) }) }()
	}
	if t.cfg.Load != nil {
		wg.Add(1)
		go func() { defer wg.Done(); t.poll(ctx, t.cfg.LoadInterval, func() { t.readLoad(ctx) }) }()
	}
	for i, c := range t.cfg.Checks {
		wg.Add(1)
		go func() { defer wg.Done(); t.poll(ctx, max(c.Every, 10*time.Millisecond), func() { t.runCheck(ctx, i) }) }()
	}
	tick := time.NewTicker(t.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
		t.Evaluate()
	}
}

// Prime reads every replica and the load once, concurrently, and decides.
func (t *Throttler) Prime(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range t.cfg.Replicas {
		wg.Add(1)
		go func() { defer wg.Done(); t.readReplica(ctx, i) }()
	}
	for i := range t.cfg.Checks {
		wg.Add(1)
		go func() { defer wg.Done(); t.runCheck(ctx, i) }()
	}
	if t.cfg.Load != nil {
		t.readLoad(ctx)
	}
	wg.Wait()
	t.Evaluate()
}

func (t *Throttler) runCheck(ctx context.Context, i int) {
	reason := t.cfg.Checks[i].Run(ctx)
	if ctx.Err() != nil {
		return
	}
	t.mu.Lock()
	t.checks[i] = reason
	t.mu.Unlock()
}

func (t *Throttler) poll(ctx context.Context, every time.Duration, read func()) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		read()
	}
}

func (t *Throttler) readReplica(ctx context.Context, i int) {
	if t.maxLag.Load() <= 0 {
		return
	}
	r := t.cfg.Replicas[i]
	rctx, cancel := context.WithTimeout(ctx, t.cfg.ReadTimeout)
	lag, err := r.Lag(rctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	rl := ReplicaLag{Name: r.Name, Lag: lag, At: time.Now()}
	if err != nil {
		rl.Err = oneLine(err)
		if errors.Is(err, context.DeadlineExceeded) {
			rl.Err = fmt.Sprintf("no answer within %s", t.cfg.ReadTimeout)
		}
	}
	t.mu.Lock()
	t.lags[i] = rl
	t.mu.Unlock()
}

func (t *Throttler) readLoad(ctx context.Context) {
	names := union(t.maxLoad.Load().Names(), t.criticalLoad.Load().Names())
	if len(names) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	vals, err := t.cfg.Load(rctx, names)
	cancel()
	if ctx.Err() != nil {
		return
	}
	asked := map[string]bool{}
	for _, n := range names {
		asked[n] = true
	}
	t.mu.Lock()
	t.load, t.loadErr, t.loadAsked = vals, err, asked
	t.mu.Unlock()
}

// Evaluate makes a decision from the latest readings (Run calls it every
// Interval; tests call it directly).
func (t *Throttler) Evaluate() {
	now := time.Now()
	var reasons []string
	if t.paused.Load() {
		reasons = append(reasons, "paused by operator")
	}
	if f := t.cfg.FlagFile; f != "" && exists(f) {
		reasons = append(reasons, "throttle flag file "+f+" exists")
	}
	if f := t.cfg.PanicFile; f != "" && exists(f) {
		t.abort(fmt.Errorf("%w: panic flag file %s exists", ErrAbort, f))
	}

	t.mu.Lock()
	maxLoad, critical := *t.maxLoad.Load(), *t.criticalLoad.Load()
	if len(maxLoad) > 0 || len(critical) > 0 {
		switch {
		case t.loadErr != nil:
			if len(maxLoad) > 0 {
				reasons = append(reasons, "max-load: cannot read the primary's status: "+oneLine(t.loadErr))
			}
		case t.load != nil:
			if ex := maxLoad.Exceeded(t.loadSeen()); ex != "" {
				reasons = append(reasons, "max-load "+ex)
			}
		}
		t.criticalLocked(now, critical)
	} else {
		t.state.CriticalSince = time.Time{}
	}

	maxLag := time.Duration(t.maxLag.Load())
	var worst time.Duration
	readable := true
	notLag := len(reasons)
	lags := make([]ReplicaLag, len(t.lags))
	for i, rl := range t.lags {
		rl.Lagging = false
		switch {
		case maxLag <= 0:
		case rl.Err != "":
			rl.Lagging, readable = true, false
			reasons = append(reasons, fmt.Sprintf("replica lag: %s unreadable (%s)", rl.Name, rl.Err))
		case now.Sub(rl.At) > t.cfg.ReadTimeout+t.cfg.Interval:
			rl.Lagging, readable = true, false
			reasons = append(reasons, fmt.Sprintf("replica lag: %s unreadable (no answer for %s)", rl.Name, now.Sub(rl.At).Round(time.Millisecond)))
		case rl.Lag > maxLag:
			rl.Lagging = true
			reasons = append(reasons, fmt.Sprintf("replica lag: %s %s > %s", rl.Name, rl.Lag.Round(time.Millisecond), maxLag))
		}
		worst = max(worst, rl.Lag)
		lags[i] = rl
	}
	t.adjustDelayLocked(now, maxLag, worst, readable)
	lagReasons := len(reasons) - notLag
	for _, r := range t.checks {
		if r != "" {
			reasons = append(reasons, r)
		}
	}

	throttled := len(reasons) > 0
	lagOnly := throttled && lagReasons == len(reasons)
	reason := strings.Join(reasons, "; ")
	st := &t.state
	if throttled != st.Throttled {
		if throttled {
			st.Since = now
			t.logStart(now, reason)
		} else {
			lasted := now.Sub(st.Since)
			t.total += lasted
			if t.logs.end(lasted) {
				t.log.Info("throttle lifted: copy resumes", "after", lasted.Round(time.Millisecond), "throttled_total", t.total.Round(time.Millisecond))
			}
			st.Since = time.Time{}
		}
	} else if throttled && st.Reason != reason && t.logs.change(now, reason) {
		t.log.Info("still throttled", "reason", reason, "for", now.Sub(st.Since).Round(time.Millisecond))
	}
	if throttled != st.Throttled || lagOnly != st.LagOnly {
		close(t.changed)
		t.changed = make(chan struct{})
	}
	st.Throttled, st.LagOnly = throttled, lagOnly
	st.Reason = reason
	st.Replicas = lags
	st.Load = t.load
	st.LoadErr = ""
	if t.loadErr != nil {
		st.LoadErr = oneLine(t.loadErr)
	}
	t.mu.Unlock()
}

// logStart logs the start of a throttled period, unless the same kind of
// reason was logged recently (stateLog): a flapping throttle logs once per
// LogEvery, with how often and how long it was throttled meanwhile.
func (t *Throttler) logStart(now time.Time, reason string) {
	log, quiet, quietFor := t.logs.start(now, reason)
	switch {
	case !log:
	case quiet > 0:
		t.log.Info("throttled: copy paused", "reason", reason,
			"meanwhile", fmt.Sprintf("throttled %d more time(s) for %s in total (not logged)", quiet, quietFor.Round(time.Millisecond)))
	default:
		t.log.Info("throttled: copy paused", "reason", reason)
	}
}

// loadSeen is the last load reading, with the variables it did not ask for
// (thresholds changed since) marked as not exceeded: a variable asked for
// and missing is unknown to the server.
func (t *Throttler) loadSeen() map[string]float64 {
	out := make(map[string]float64, len(t.load))
	for k, v := range t.load {
		out[k] = v
	}
	for _, th := range []*Thresholds{t.maxLoad.Load(), t.criticalLoad.Load()} {
		for _, n := range th.Names() {
			if _, ok := out[n]; !ok && !t.loadAsked[n] {
				out[n] = -1 // not read yet
			}
		}
	}
	return out
}

// criticalLocked tracks the critical load and aborts once it has lasted
// the grace period.
func (t *Throttler) criticalLocked(now time.Time, critical Thresholds) {
	st := &t.state
	ex := ""
	if len(critical) > 0 && t.loadErr == nil && t.load != nil {
		ex = critical.Exceeded(t.loadSeen())
	}
	if ex == "" {
		if !st.CriticalSince.IsZero() {
			t.log.Info("critical load is over", "lasted", now.Sub(st.CriticalSince).Round(time.Millisecond))
		}
		st.CriticalSince = time.Time{}
		return
	}
	if st.CriticalSince.IsZero() {
		st.CriticalSince = now
		if t.cfg.CriticalLoadGrace > 0 {
			t.log.Warn("critical load: the migration aborts if it lasts", "load", ex, "grace", t.cfg.CriticalLoadGrace)
		}
	}
	if lasted := now.Sub(st.CriticalSince); lasted >= t.cfg.CriticalLoadGrace {
		go t.abort(fmt.Errorf("%w: critical load %s for %s (--critical-load %s, grace %s)", ErrAbort, ex,
			lasted.Round(time.Millisecond), critical, t.cfg.CriticalLoadGrace))
	}
}

// adjustDelayLocked slows the applier while the replicas lag and their lag
// keeps growing although the copy is paused: doubling (from 10 ms) up to a
// cap of a quarter of the excess (at most 1 s) while it grows, halving once
// the lag is under the limit.
func (t *Throttler) adjustDelayLocked(now time.Time, maxLag, worst time.Duration, readable bool) {
	d := time.Duration(t.delay.Load())
	defer func() { t.state.ApplierDelay = time.Duration(t.delay.Load()) }()
	if maxLag <= 0 || !readable || len(t.lags) == 0 {
		t.lagHist = t.lagHist[:0]
		if d > 0 {
			t.delay.Store(int64(d / 2))
		}
		return
	}
	t.lagHist = append(t.lagHist, lagSample{now, worst})
	for len(t.lagHist) > 0 && now.Sub(t.lagHist[0].at) > 3*time.Second {
		t.lagHist = t.lagHist[1:]
	}
	if worst <= maxLag {
		if d /= 2; d < time.Millisecond {
			d = 0
		}
		t.delay.Store(int64(d))
		return
	}
	// Growing: higher now than a second ago, with the copy paused (it is,
	// the lag being over the limit) for that second.
	var ago *lagSample
	for i := len(t.lagHist) - 1; i >= 0; i-- {
		if now.Sub(t.lagHist[i].at) >= time.Second {
			ago = &t.lagHist[i]
			break
		}
	}
	if ago == nil || ago.lag <= maxLag || worst <= ago.lag {
		return // not (yet) known to grow: keep the delay
	}
	limit := min((worst-maxLag)/4, time.Second)
	d = min(max(2*d, 10*time.Millisecond), max(limit, 10*time.Millisecond))
	if d != time.Duration(t.delay.Load()) && t.warnable("delay", 5*time.Second) {
		t.log.Info("replica lag grows while the copy is paused: slowing the applier", "lag", worst.Round(time.Millisecond), "max_lag", maxLag, "delay_per_window", d)
	}
	t.delay.Store(int64(d))
}

func (t *Throttler) warnable(key string, every time.Duration) bool {
	if time.Since(t.lastWarn[key]) < every {
		return false
	}
	t.lastWarn[key] = time.Now()
	return true
}

func (t *Throttler) abort(err error) {
	t.mu.Lock()
	if t.aborted {
		t.mu.Unlock()
		return
	}
	t.aborted = true
	t.mu.Unlock()
	t.log.Warn("aborting the migration", "reason", err)
	t.cfg.Abort(err)
}

// Wait blocks while the copy must pause; it returns ctx's error if ctx ends
// first.
func (t *Throttler) Wait(ctx context.Context) error { return t.wait(ctx, false) }

// WaitReads is Wait for work that only reads the primary (the checksum):
// replica lag, which it does not add to, does not hold it.
func (t *Throttler) WaitReads(ctx context.Context) error { return t.wait(ctx, true) }

func (t *Throttler) wait(ctx context.Context, reads bool) error {
	for {
		t.mu.Lock()
		hold, ch := t.state.Throttled && !(reads && t.state.LagOnly), t.changed
		t.mu.Unlock()
		if !hold {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ch:
		}
	}
}

// Throttled reports whether the copy must pause now, and why.
func (t *Throttler) Throttled() (bool, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state.Throttled, t.state.Reason
}

// State returns the current state.
func (t *Throttler) State() State {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state
	s.Replicas = append([]ReplicaLag(nil), s.Replicas...)
	s.ThrottledFor = t.total
	if s.Throttled {
		s.ThrottledFor += time.Since(s.Since)
	}
	s.Paused = t.paused.Load()
	s.MaxLag = time.Duration(t.maxLag.Load())
	s.MaxLoad = *t.maxLoad.Load()
	s.CriticalLoad = *t.criticalLoad.Load()
	return s
}

// ApplierDelay is how long the applier should wait between windows.
func (t *Throttler) ApplierDelay() time.Duration { return time.Duration(t.delay.Load()) }

// Pause pauses the copy until Resume (the decision is taken at once).
func (t *Throttler) Pause() { t.paused.Store(true); t.Evaluate() }

// Resume ends an operator's pause (other reasons to pause still count).
func (t *Throttler) Resume() { t.paused.Store(false); t.Evaluate() }

// SetMaxLag changes --max-lag (0: lag ignored).
func (t *Throttler) SetMaxLag(d time.Duration) { t.maxLag.Store(int64(d)); t.Evaluate() }

// SetMaxLoad changes --max-load.
func (t *Throttler) SetMaxLoad(th Thresholds) { t.maxLoad.Store(&th); t.Evaluate() }

// SetCriticalLoad changes --critical-load.
func (t *Throttler) SetCriticalLoad(th Thresholds) { t.criticalLoad.Store(&th); t.Evaluate() }

func exists(f string) bool {
	_, err := os.Stat(f)
	return !errors.Is(err, fs.ErrNotExist)
}

func union(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range append(append([]string(nil), a...), b...) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
