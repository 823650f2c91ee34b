package throttle

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Pacer spaces the copy's chunks so that the application's transactions
// keep their latency (--max-latency-ratio). It commits a tiny write, the
// probe, every Every on its own connection; the probe's latency before the
// copy starts is the baseline. While the copy runs it keeps a duty cycle,
// the share of each copy thread's time spent inside chunks: when the
// probe's recent latency is above Ratio × the baseline the duty is cut
// (multiplicatively), when it is well below it grows back (additively),
// and after each chunk the thread sleeps so that its chunks fill only that
// share of its time.
//
// On an idle server the copy alone raises the probe's latency. With Active
// set, the pacer asks every activeEvery whether the application is using
// the server, and while it has not seen the application for idleAfter the
// copy runs at full duty (there is nobody to protect) and the duty is held
// where it was, to be used again as soon as the application shows up.
type Pacer struct {
	cfg PacerConfig

	mu     sync.Mutex
	before []time.Duration // probes before Begin (the last baselineKeep)
	recent []time.Duration // probes since Begin (the last recentKeep)
	// window: the last shareKeep probes since the baseline was taken;
	// baseProbes: the probes the baseline was taken from. The share of
	// each over the limit tells whether the copy makes slow probes more
	// frequent than they were without it (tailClean).
	window     []time.Duration
	baseProbes []time.Duration
	// basePool: the probes the baseline is the p90 of: those before the
	// copy, then each measurement's settled ones added (the last
	// baselineKeep kept), so that one measurement's few probes do not set
	// it alone (measure).
	basePool []time.Duration
	since    int           // probes since the last duty decision
	decided  time.Time     // when the last decision was made
	base     time.Duration // baseline: 0 until Begin
	// anchor: the baseline never rises above maxDrift × it: Begin's
	// baseline, or the first measured with the application active when
	// Begin's was quiet (0 before Begin).
	anchor  time.Duration
	current time.Duration // the latency the last decision saw
	duty    float64
	began   bool
	// chunkEnd: when the copy's last chunk ended (Pause); the duty grows
	// only while chunks run. lastPause: the pause given after it (near the
	// floor a thread sleeps seconds between chunks: that is the duty's own
	// doing, not a hold by something else).
	chunkEnd  time.Time
	lastPause time.Duration

	probes     int       // probes observed (the first, which dials, is not a sample)
	measuring  bool      // the copy is held while the baseline is measured again
	measureAt  time.Time // ... from (samples after measureAt+measureSettle count) ...
	measureEnd time.Time // ... at least until
	measured   []sample
	rebased    time.Time // when the baseline was last taken
	baseQuiet  bool      // the baseline was taken before any application activity was seen

	answers    int       // Active's answers so far
	seen       bool      // Active has said yes at least once
	polled     bool      // Active has answered idleMinPolls times
	lastActive time.Time // when Active last said the application was there
	wasIdle    bool      // idle at the last answer (for the log)
	logged     time.Time // the last idle/active log at Info
}

// PacerConfig configures a Pacer.
type PacerConfig struct {
	// Ratio: the probe's recent latency (its 90th percentile over the
	// last recentKeep probes) may be at most Ratio × the baseline.
	Ratio float64
	// Probe runs one probe transaction; its duration is the sample.
	Probe func(ctx context.Context) error
	// Every is the time between probes (default 50 ms).
	Every time.Duration
	// Active, when set, tells whether the application is using the server
	// now; asked every activeEvery. An error counts as "in use", but for
	// ErrNoAnswer: Active cannot tell yet, and the answer does not count
	// (until idleMinPolls answers have come, the copy is paced).
	Active func(ctx context.Context) (bool, error)
	Logger *slog.Logger
}

const (
	// baselineKeep: probes the baseline is taken over (5 s at 50 ms). It
	// was 40 (2 s): on session 17's bench (MySQL 9.7, light load, a probe
	// of recast's kind logged outside recast for the whole run) the p90
	// of 2 s of probes ranged from 0.65 to 2.1 times that of the minute
	// before the copy, of 5 s from 0.8 to 1.7, and recast's baseline came
	// out at 1.9 times it: a limit twice as loose as asked.
	baselineKeep = 100
	// baselineMin: probes Begin waits for, at most baselineWait. It was 10
	// (500 ms), and their p90 is the second slowest of them: in one
	// session-10 bench run the lock-free copy's baseline came out at 430 µs
	// and the locking copy's at 1.47 ms under the same load (sysbench's
	// p99 1.1 and 1.4 ms), and the duties followed (2-3 % against 5-30 %).
	// The full baselineKeep costs a copy the application is using about
	// 5 s (none of one it is not: baselineQuietMin).
	baselineMin = baselineKeep
	// ... or this many once Active has called the application idle: there
	// is nobody to protect, so the copy starts at full duty without waiting
	// for a baseline it does not use yet (taken on a quiet server, it is
	// replaced whole when the application shows up).
	baselineQuietMin = 3
	baselineWait     = 6 * time.Second
	recentKeep       = 20                     // probes the current latency is taken over (1 s at 50 ms)
	shareKeep        = 100                    // probes the share of slow ones is taken over (5 s at 50 ms) ...
	shareMin         = 40                     // ... once there are this many
	decideEvery      = 10                     // probes between duty decisions (500 ms at 50 ms) ...
	decideAfter      = 500 * time.Millisecond // ... or this long, when probes are slow
	probeTimeout     = time.Second            // a probe taking longer counts as this long
	// minDuty: the floor. It was 2 % until session 19; on session 19's
	// bench (MariaDB 10.11, light load, 200,000 rows) the pacer sat there
	// and sysbench's p99 rose ×3.0-3.8 by the median of the seconds. What
	// the copy costs the application there follows its rows a second (the
	// replica replays them on the same 2 vCPUs, the binlog and redo carry
	// them), and a 10 ms chunk moves 700 rows at light load: a floor of
	// 0.4 % is about 1,700 rows a second for 2 threads there.
	minDuty = 0.004
	// dutyGrowth: the duty's relative growth per decision.
	// The duty is cut by 40 % when the probe's p90 of the last second is
	// above the limit and grown by dutyGrowth when it is below 75 % of it,
	// so it settles where cuts and growths balance: with a growth of a
	// quarter, where about 3 decisions in 10 are over the limit (ln 1.25
	// against ln(1/0.6)), and the probe's mean p90 sat well above the
	// limit (session 17's bench, MySQL 9.7, light load: ×3.2 the
	// baseline against a limit of ×2, the duty swinging between 2 % and
	// 69 % within seconds, sysbench's p99 ×2.3). With 5 %, about 1 in 11.
	dutyGrowth = 0.05
	// startDuty: the duty the copy starts at while the application is
	// active (the pacer learns the rest; an idle server's copy runs at
	// full duty). At 0.5 the copy's first seconds were the run's worst
	// for the application (session 17's bench: a 74 ms probe 2.5 s in).
	// At 0.1 (until session 19) the probe often did not see the copy
	// (its p90 needs 2 probes of 20 slowed; sysbench's p99 1 transaction
	// of 100) and short copies ran at 10 % throughout, ×3.6-4.0 the p99:
	// the duty starts low and grows only through clean seconds.
	startDuty   = 0.01
	minBaseline = 200 * time.Microsecond // a faster probe is noise, not a budget
	maxPause    = 3 * time.Second        // a 10 ms chunk at the floor pauses 2.5 s
	// The baseline is measured again, the copy held for measureFor, when
	// the application shows up after being idle and every rebaseEvery while
	// it is active: the application's own load changes (a baseline taken on
	// a quiet server would hold the copy at its floor once the day's
	// traffic starts), and the probe's latency without the copy is the
	// budget's base. The first measureSettle lets the chunks in flight end.
	//
	// The copy's effects outlast its chunks (dirty pages to flush, redo to
	// checkpoint, the replica's and the applier's share): the measurement
	// goes on, up to measureMax, while the probe's latency is still
	// falling (the p90 of the last measureStep below 0.9 × the step
	// before's). A measurement taken while the application was already
	// active adds its settled probes (the last measureStep) to the pool
	// the baseline is the p90 of (basePool), and moves the baseline by at
	// most maxRaise either way: on the bench the probe stayed at 2× its
	// pre-copy baseline for 10 s at a 2 % duty, and accepting that as the
	// new base let the next minute's copy run at full duty (the limit
	// grows with the base it is measured against). A baseline taken on a
	// quiet server is not the application's: the first measurement with
	// the application active replaces it, and the pool, whole.
	measureFor    = 1250 * time.Millisecond
	measureMax    = 5 * time.Second
	measureStep   = 500 * time.Millisecond
	measureSettle = 250 * time.Millisecond
	measureMin    = 5 // samples a measurement needs to replace the baseline
	maxRaise      = 1.25
	// maxDrift: the baseline never rises above maxDrift × the anchor:
	// Begin's baseline, taken before the copy, or, when that one was taken
	// on a quiet server, the first measurement with the application
	// active (the copy held, but after a stretch of unpaced copying).
	// Each measurement may raise it by maxRaise, and what a 1.25 s
	// hold does not remove (the applier's writes, which no measurement
	// holds; pages and redo still being flushed; the replica) came back as
	// base: on session 32's bench (MySQL 9.7, light load, sysbench at a
	// fixed rate) seven measurements took it from 1.94 to 3.59 ms, the
	// copy from 1,000 to 4,800 rows a second, and sysbench's p99 from
	// ×1.9 in the copy's first minute to ×3.6 in its last 90 s. An
	// application whose own latency grows for good holds the copy nearer
	// its floor (--min-copy-rate), which still ends it.
	maxDrift    = 1.25
	rebaseEvery = time.Minute
	activeEvery = 250 * time.Millisecond // how often Active is asked ...
	idleAfter   = 2 * time.Second        // ... and how long it must say no before the copy runs unpaced
	// idleMinPolls: Active's answers before the application may be called
	// idle. Its first answers know little (the binlog's rows are counted
	// between two polls, a session must be seen twice): on the bench the
	// first answer said no under 410 tps, the copy ran unpaced, and the
	// baseline was then measured on top of its after-effects. Until it has
	// them, Active is asked with every probe (Every), not every
	// activeEvery, so that Begin knows by the time the baseline is taken:
	// asked every activeEvery, the copy of an idle server waited 0.5 s for
	// the baseline and then ran its first 0.3 s paced (bench, 1M rows:
	// 70,000 rows in the first second against 184,000 unpaced).
	idleMinPolls = 6
)

// ErrNoAnswer is Active's "cannot tell yet": not an answer, not an error.
var ErrNoAnswer = errors.New("throttle: no answer yet")

// sample is one probe's latency and when it ended.
type sample struct {
	at time.Time
	d  time.Duration
}

// NewPacer returns a Pacer; Run starts probing.
func NewPacer(cfg PacerConfig) *Pacer {
	if cfg.Every <= 0 {
		cfg.Every = 50 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pacer{cfg: cfg, duty: startDuty}
}

// Run probes every Every until ctx ends.
func (p *Pacer) Run(ctx context.Context) {
	t := time.NewTicker(p.cfg.Every)
	defer t.Stop()
	var lastErr, lastPoll time.Time
	for {
		if p.cfg.Active != nil && (time.Since(lastPoll) >= activeEvery || !p.hasPolled()) {
			lastPoll = time.Now()
			actx, cancel := context.WithTimeout(ctx, probeTimeout)
			active, err := p.cfg.Active(actx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			switch {
			case errors.Is(err, ErrNoAnswer):
			case err != nil && time.Since(lastErr) > 10*time.Second:
				p.cfg.Logger.Warn("pacing: cannot tell whether the application is active (taken as active)", "err", err)
				lastErr = time.Now()
				fallthrough
			default:
				p.noteActive(active || err != nil, time.Now())
			}
		}
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := p.cfg.Probe(pctx)
		cancel()
		took := time.Since(start)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			took = probeTimeout // a probe that fails or times out counts as slow
			if time.Since(lastErr) > 10*time.Second {
				p.cfg.Logger.Warn("pacing: the latency probe failed", "err", err)
				lastErr = time.Now()
			}
		}
		p.observe(took, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// observe records one probe's latency, taken at now, and after Begin
// decides the duty every decideEvery probes or decideAfter.
func (p *Pacer) observe(d time.Duration, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.probes++
	if p.probes == 1 {
		return // it opened the probe's connection: not a sample
	}
	if !p.began {
		p.before = keepLast(append(p.before, d), baselineKeep)
		return
	}
	if p.measuring {
		p.measure(d, now)
		return
	}
	if p.cfg.Ratio > 0 && !p.idleAt(now) && now.Sub(p.rebased) >= rebaseEvery {
		p.startMeasure(now)
		return
	}
	p.recent = keepLast(append(p.recent, d), recentKeep)
	p.window = keepLast(append(p.window, d), shareKeep)
	p.since++
	if (p.since < decideEvery && now.Sub(p.decided) < decideAfter) || len(p.recent) < min(3, recentKeep) {
		return
	}
	p.since, p.decided = 0, now
	p.current = percentile(p.recent, 0.9)
	if p.cfg.Ratio == 0 || p.idleAt(now) {
		return // not pacing, or only the copy is there: the duty is held
	}
	limit := time.Duration(float64(p.base) * p.cfg.Ratio)
	next := nextDuty(p.duty, p.current, p.base, p.cfg.Ratio, tailClean(slices.Max(p.recent), limit, p.window, p.baseProbes))
	if next > p.duty && now.Sub(p.chunkEnd) > time.Duration(recentKeep)*p.cfg.Every+p.lastPause {
		// No chunk ended while these probes were taken: the copy was held
		// by something else (replica lag, --max-load, a pause) and the
		// probe's low latency says nothing about it. Grown meanwhile, the
		// duty let the copy run at full duty once the hold ended (bench,
		// session 11, heavy load: the duty at 100 % through most of the
		// replica-lag pauses, and the copy's bursts after them).
		next = p.duty
	}
	if next != p.duty {
		p.cfg.Logger.Debug("pacing: copy duty changed", "duty", next, "probe_p90", p.current, "baseline", p.base)
	}
	p.duty = next
}

// startMeasure holds the copy to measure the baseline again; p.mu is held.
func (p *Pacer) startMeasure(now time.Time) {
	p.measuring, p.measureAt, p.measureEnd, p.measured = true, now, now.Add(measureFor), p.measured[:0]
}

// measure takes one probe of a measurement, and ends it once it has
// lasted measureFor and the probe's latency no longer falls, or at
// measureMax; p.mu is held.
func (p *Pacer) measure(d time.Duration, now time.Time) {
	if now.Sub(p.measureAt) >= measureSettle {
		p.measured = append(p.measured, sample{now, d})
	}
	if now.Before(p.measureEnd) {
		return
	}
	last, prev := p.measuredSince(now.Add(-measureStep), now), p.measuredSince(now.Add(-2*measureStep), now.Add(-measureStep))
	falling := len(last) >= 3 && len(prev) >= 3 && float64(percentile(last, 0.9)) < 0.9*float64(percentile(prev, 0.9))
	if falling && now.Sub(p.measureAt) < measureMax {
		return // the copy's after-effects are still fading
	}
	p.measuring, p.rebased = false, now
	all := p.measuredSince(p.measureAt, now)
	if len(all) < measureMin {
		return // too few probes (slow ones): keep the baseline
	}
	if len(last) < measureMin {
		last = all
	}
	measured := max(percentile(last, 0.9), minBaseline)
	ceiling := time.Duration(maxDrift * float64(p.anchor))
	limited := !p.baseQuiet && p.base > 0 && (float64(measured) > maxRaise*float64(p.base) || (p.anchor > 0 && measured > ceiling))
	var base time.Duration
	if p.baseQuiet || p.base == 0 {
		// A quiet server's probes are not the application's: replaced whole.
		p.basePool = append(p.basePool[:0], all...)
		base = measured
		p.anchor = base
	} else {
		// The p90 of the pool, not of this measurement's probes alone, and
		// moved by at most maxRaise either way. Taken from the last 500 ms
		// of one measurement (about 10 probes), the baseline followed
		// their noise, and with raises limited and falls not, it ratcheted
		// down: on session 23's bench (MariaDB 10.11, heavy load) the
		// first measurement took it from 2.42 ms (100 probes before the
		// copy) to 1.16 ms, and the probe's p90 stayed at 2.5-4.5 ms with
		// the copy at its 0.4 % floor, 400 rows a second, the applier
		// writing nothing yet (ETA 1h12m for 1M rows).
		p.basePool = keepLast(append(p.basePool, last...), baselineKeep)
		base = max(percentile(p.basePool, 0.9), minBaseline)
		base = min(max(base, time.Duration(float64(p.base)/maxRaise)), time.Duration(maxRaise*float64(p.base)))
		if p.anchor > 0 {
			base = min(base, ceiling)
		}
	}
	if limited {
		p.cfg.Logger.Debug("pacing: a measurement over the raise limit (its probes left out of the tail's share)", "measured", measured, "was", p.base,
			"max_raise", maxRaise, "ceiling", ceiling)
	} else if p.baseQuiet {
		p.baseProbes = append(p.baseProbes[:0], all...) // a quiet server's are not the application's
	} else {
		// The probes without the copy, for their share over the limit
		// (tailClean): added to the last baselineKeep, so that one short
		// measurement (25 probes at 1.25 s) does not set the share alone;
		// not those of a measurement whose raise was limited (the copy's
		// after-effects would count as the application's own tail).
		p.baseProbes = keepLast(append(p.baseProbes, all...), baselineKeep)
	}
	if base != p.base {
		p.cfg.Logger.Debug("pacing: baseline measured again with the copy held", "baseline_p90", base, "was", p.base,
			"probes", len(all), "held", now.Sub(p.measureAt).Round(time.Millisecond))
	}
	p.base, p.baseQuiet = base, !p.seen
	p.recent, p.window, p.since, p.decided = p.recent[:0], p.window[:0], 0, now
}

// measuredSince is the measurement's samples taken after from, up to to;
// p.mu is held.
func (p *Pacer) measuredSince(from, to time.Time) []time.Duration {
	var ds []time.Duration
	for _, s := range p.measured {
		if s.at.After(from) && !s.at.After(to) {
			ds = append(ds, s.d)
		}
	}
	return ds
}

// noteActive records Active's answer at now.
func (p *Pacer) noteActive(active bool, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers++
	if active {
		p.lastActive, p.seen = now, true
		if !p.polled {
			p.baseQuiet = false // seen within the first answers: the baseline had the application
		}
	}
	if !p.polled && p.answers >= idleMinPolls {
		p.polled = true
		if !p.seen {
			p.lastActive = now.Add(-idleAfter) // idle from the first answers, all no
		}
	}
	idle := p.idleAt(now)
	if idle == p.wasIdle {
		return
	}
	p.wasIdle = idle
	if !idle && p.began && p.cfg.Ratio > 0 && !p.measuring {
		p.startMeasure(now) // the application is back: its latency without the copy is the base
	}
	level := slog.LevelInfo // a state change, at most one a minute at Info (an intermittent application flaps)
	if now.Sub(p.logged) < time.Minute {
		level = slog.LevelDebug
	} else {
		p.logged = now
	}
	if idle {
		p.cfg.Logger.Log(context.Background(), level, "pacing: no application activity seen; the copy runs unpaced until there is", "for", idleAfter)
	} else {
		p.cfg.Logger.Log(context.Background(), level, "pacing: the application is active; the copy is paced again", "duty", p.duty)
	}
}

// hasPolled tells whether Active has answered idleMinPolls times.
func (p *Pacer) hasPolled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.polled
}

// idleAt tells whether the application has been absent, by Active's
// answers, for idleAfter at now; p.mu is held.
func (p *Pacer) idleAt(now time.Time) bool {
	return p.cfg.Active != nil && p.polled && now.Sub(p.lastActive) >= idleAfter
}

// Begin ends the baseline (waiting, at most baselineWait, for baselineMin
// probes, or baselineQuietMin once Active has called the application
// idle): call it just before the copy starts (a run resumed after its copy,
// before the checksum). Once begun, it returns at once.
func (p *Pacer) Begin(ctx context.Context) {
	deadline := time.Now().Add(baselineWait)
	for {
		p.mu.Lock()
		if p.began {
			p.mu.Unlock()
			return
		}
		n := len(p.before)
		quiet := n >= baselineQuietMin && p.idleAt(time.Now())
		if n >= baselineMin || quiet || time.Now().After(deadline) || ctx.Err() != nil {
			p.began, p.decided, p.rebased = true, time.Now(), time.Now()
			p.base, p.baseQuiet = max(percentile(p.before, 0.9), minBaseline), !p.seen
			p.anchor = p.base // until a quiet one is replaced (measure)
			p.baseProbes, p.basePool = slices.Clone(p.before), slices.Clone(p.before)
			base := p.base
			p.mu.Unlock()
			p.cfg.Logger.Info("pacing the copy by a probe transaction's latency", "baseline_p90", base, "probes", n,
				"limit", time.Duration(float64(base)*p.cfg.Ratio))
			return
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(min(p.cfg.Every, 10*time.Millisecond)):
		}
	}
}

// Pause is the copier's hook after a chunk that took took: it sleeps so
// that the thread's chunks fill only the duty share of its time.
func (p *Pacer) Pause(ctx context.Context, took time.Duration) error {
	return Sleep(ctx, p.PauseFor(took))
}

// Sleep waits d or until ctx ends, and returns ctx's error then; a d of
// zero or less only reports ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// PauseFor is the sleep Pause would take after a chunk that took took.
func (p *Pacer) PauseFor(took time.Duration) time.Duration { return p.pauseForAt(took, time.Now()) }

func (p *Pacer) pauseForAt(took time.Duration, now time.Time) time.Duration {
	p.mu.Lock()
	p.chunkEnd = now
	if p.measuring && p.cfg.Ratio > 0 {
		d := p.measureEnd.Sub(now)
		p.mu.Unlock()
		return max(d, 0) // held while the baseline is measured
	}
	d := pauseFor(took, p.dutyAt(now))
	p.lastPause = d
	p.mu.Unlock()
	return d
}

// PaceState is what the status shows of the pacer.
type PaceState struct {
	Duty              float64
	Baseline, Current time.Duration // probe p90 before the copy, at the last decision
	Ratio             float64
	Idle              bool // no application activity seen for a while: the copy is not paced
	// Seen: Active said the application is there within idleAfter (Idle
	// and Seen both false: it cannot tell yet).
	Seen      bool
	Measuring bool // the copy is held while the baseline is measured again
}

// State returns the pacer's current state.
func (p *Pacer) State() PaceState {
	p.mu.Lock()
	defer p.mu.Unlock()
	duty, idle := p.duty, p.idleAt(time.Now())
	if p.cfg.Ratio == 0 || idle {
		duty = 1
	}
	now := time.Now()
	return PaceState{Duty: duty, Baseline: p.base, Current: p.current, Ratio: p.cfg.Ratio, Idle: idle,
		Seen: p.seen && now.Sub(p.lastActive) < idleAfter, Measuring: p.measuring && p.cfg.Ratio > 0}
}

// Duty is the share of a copy thread's time its chunks may fill: 1 before
// Begin, while the ratio is 0 (pacing turned off at run time) and while
// the application is idle (Active).
func (p *Pacer) Duty() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dutyAt(time.Now())
}

// dutyAt is Duty at now; p.mu is held.
func (p *Pacer) dutyAt(now time.Time) float64 {
	if !p.began || p.cfg.Ratio == 0 || p.idleAt(now) {
		return 1
	}
	return p.duty
}

// Holding tells whether the pacer is holding the copy back now: it has
// begun, pacing is on and the application is not idle (Active). A copy
// held back runs short chunks (migration.PacedChunkTime).
func (p *Pacer) Holding() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.began && p.cfg.Ratio > 0 && !p.idleAt(time.Now())
}

// AppActive tells whether the application may be using the server: Active
// has not called it idle (while Active cannot tell yet, nor when it is not
// set, it may be). Unlike Holding, it does not depend on the ratio:
// --max-copy-rate applies while it is true.
func (p *Pacer) AppActive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.idleAt(time.Now())
}

// SetRatio changes the ratio while running (0: no pacing; the probe goes
// on, so that it can be turned on again against the same baseline).
func (p *Pacer) SetRatio(r float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg.Ratio = r
}

// nextDuty is the controller: cut the duty by 40 % while latency (the
// probe's p90 over the last second) is above ratio × base; grow it by
// dutyGrowth while latency is below 75 % of that and no probe of the
// second (slowest) was above it; keep it otherwise (hysteresis). The
// growth is relative: at the low duties a busy server holds the copy to, a
// fixed step of 0.1 took the copy from 2 % to 12 % in one decision, a burst
// the application's tail paid for every few seconds (bench, session 10: the
// duty swung between 2 % and 22 % at light load).
//
// Why the slowest probe holds the growth: the application's p99 is hurt
// once about 1 % of its transactions meet a chunk, and the probe's p90
// over 20 probes sees that only once 2 of them do. On session 19's bench
// (MariaDB 10.11, light load) 3.2-10.7 % of the probes were over the limit
// during the copy against 0.3-2.2 % before it, the duty settled at 2-10 %,
// and sysbench's p99 rose ×3.0-3.8 by the median of the seconds: a duty
// the p90 allowed and the p99 did not. A single slow probe in a second now
// stops the growth (it does not cut: that would follow the probe's own
// noise); with the lower floor and start, the duty stayed at 0.4-1.7 %.
//
// A second with a slow probe does not stop the growth when the application
// has as many slow probes without the copy (tailClean): on a server whose
// own tail is wide most seconds have one, and the duty sat at its floor
// with the application's p99 unchanged (session 21's bench, MySQL 9.7 on a
// VM with slow fsyncs, light load, 1M rows: sysbench's p99 15.5 ms during
// the copy against 16.1 ms before, the duty mostly at 0.4-0.6 %, 45 % of
// the copy done after 10 minutes).
func nextDuty(duty float64, latency, base time.Duration, ratio float64, tailClean bool) float64 {
	limit := float64(base) * ratio
	switch {
	case float64(latency) > limit:
		return max(duty*0.6, minDuty)
	case float64(latency) < 0.75*limit && tailClean:
		return min(duty*(1+dutyGrowth), 1)
	}
	return duty
}

// tailClean tells whether the probes' tail allows the duty to grow: the
// slowest probe of the last second is within the limit, or the share of
// probes over the limit among the last shareKeep (at least shareMin of
// them) is no higher than among the probes the baseline was taken from.
// The share, not one second's slowest, is what the copy changes on a
// server whose tail is wide without it.
func tailClean(slowest, limit time.Duration, window, base []time.Duration) bool {
	if slowest <= limit {
		return true
	}
	if len(window) < shareMin || len(base) == 0 {
		return false
	}
	return overShare(window, limit) <= overShare(base, limit)
}

// overShare is the share of ds above limit.
func overShare(ds []time.Duration, limit time.Duration) float64 {
	n := 0
	for _, d := range ds {
		if d > limit {
			n++
		}
	}
	return float64(n) / float64(len(ds))
}

// pauseFor is the sleep after a chunk of took at duty d: took × (1−d)/d,
// at most maxPause.
func pauseFor(took time.Duration, d float64) time.Duration {
	if d >= 1 || took <= 0 {
		return 0
	}
	d = max(d, minDuty)
	return min(time.Duration(float64(took)*(1-d)/d), maxPause)
}

// percentile is the q-th percentile (nearest rank) of ds; 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s)) + 0.5)
	return s[min(max(i-1, 0), len(s)-1)]
}

func keepLast(ds []time.Duration, n int) []time.Duration {
	if len(ds) > n {
		return append(ds[:0], ds[len(ds)-n:]...)
	}
	return ds
}
