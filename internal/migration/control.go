package migration

// Live control: abort/pause plumbing, live settings, the status snapshot.
//
// A Control shows one migration and steers it. The CLI makes one, serves it
// over HTTP and a unix socket (package status) and runs the migration with
// Control.Run; a migration run without one gets a private Control (it
// still throttles and prints progress). During the copy method's pipeline
// (execute.go) the Control starts the throttle runtime (package throttle:
// replicas, heartbeat, throttler) and samples the counters once a second
// into a status.Meter (rates, history, ETA; meter.go).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/recast-osc/recast/internal/copier"
	"github.com/recast-osc/recast/internal/mdl"
	"github.com/recast-osc/recast/internal/pipeline"
	"github.com/recast-osc/recast/internal/settings"
	"github.com/recast-osc/recast/internal/status"
	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/throttle"
)

// HeartbeatName is the heartbeat table of table t (replica lag).
func HeartbeatName(t string) string { return "_" + t + "_hb" }

// ErrAborted is wrapped by the error of a migration stopped by Abort, the
// panic flag file or a critical load.
var ErrAborted = throttle.ErrAbort

// Control shows and steers one migration; see status.Controller. The zero
// value is not usable: NewControl.
type Control struct {
	mu       sync.Mutex
	pauseMu  sync.Mutex // orders pause/resume reaching the throttler
	inited   bool
	table    string
	alter    string
	phase    string
	err      string
	started  time.Time
	finished time.Time

	// Settings (the source of truth; pushed to the parts when attached).
	threads       int
	chunkTime     time.Duration
	copyChunkTime time.Duration // the chunk time last given to the copier (chunkTime, or PacedChunkTime while paced)
	maxChunkRows  int
	maxLag        time.Duration
	maxLoad       throttle.Thresholds
	critical      throttle.Thresholds
	grace         time.Duration
	flagFile      string
	panicFile     string
	postponeFile  string
	throttleQuery string // --throttle-query, changeable live
	niceRatio     float64
	rateCap       *throttle.RateCap // --max-copy-rate (never nil; rate 0: no cap)
	minRate       float64           // --min-copy-rate (0: no floor)
	paused        bool

	hooks       *hookRunner             // the running migration's hooks (hooks.go), for InteractiveCommand
	cancelOuter context.CancelCauseFunc // Control.Run's context
	cancelRun   context.CancelCauseFunc // the copy pipeline's (execute.go)
	aborted     error

	// The running pipeline (nil outside the copy method).
	cp       *copier.Copier
	ap       *pipeline.Applier
	pump     *pipeline.Pump
	thr      *throttle.Runtime
	db       *sql.DB // the primary (validating load variables)
	estimate int64
	blockers []mdl.Blocker
	// copiedBefore: rows a resumed run's predecessors copied (progress
	// counts them).
	copiedBefore int64
	// cutNote says what the cut-over waits for before requesting the lock.
	cutNote string

	// Read by the pump between windows without c.mu (applierDelay): the
	// throttler, whether the cut-over runs, and fullSpeed (the applier
	// runs without the throttle's delay: the cut-over's last catch-up and
	// the drain under lock).
	th        atomic.Pointer[throttle.Throttler]
	cutting   atomic.Bool
	fullSpeed atomic.Bool

	meter status.Meter // meter.go

	// The checksum's first round: started, the rows compared, over
	// (checksumProgress).
	checkStarted bool
	checked      atomic.Int64
	checkDone    bool

	copyLock copyLockState // copy_lock.go
}

// NewControl returns a Control; Run runs a migration under it.
func NewControl() *Control {
	return &Control{phase: status.PhaseInspect, started: time.Now(), rateCap: throttle.NewRateCap(0)}
}

// Run runs the migration described by opts under c (see migration.Run):
// phases, failures and aborts show in c.Status().
func (c *Control) Run(ctx context.Context, opts Options, rt Runtime) (*Result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c.mu.Lock()
	c.cancelOuter = cancel
	c.started = time.Now()
	c.phase = status.PhaseInspect
	c.mu.Unlock()
	c.init(opts)
	rt.Control = c
	res, err := Run(ctx, opts, rt)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && c.aborted != nil && !errors.Is(err, ErrAborted) && !errors.Is(err, errAfterSwap) {
		err = fmt.Errorf("%w (%w)", c.aborted, err)
	}
	c.finished = time.Now()
	c.cancelOuter, c.cancelRun = nil, nil
	c.blockers = nil
	if err != nil {
		c.phase, c.err = status.PhaseFailed, strings.Join(strings.Fields(err.Error()), " ")
	} else {
		c.phase = status.PhaseDone
	}
	return res, err
}

// init takes the settings from opts, once.
func (c *Control) init(o Options) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inited {
		return
	}
	c.inited = true
	c.table = table.QuoteIdent(o.Database) + "." + table.QuoteIdent(o.Table)
	c.alter = o.Alter
	c.threads, c.chunkTime, c.maxChunkRows = o.Threads, o.ChunkTime, o.MaxChunkRows
	c.maxLag, c.maxLoad, c.critical, c.grace = o.MaxLag, o.MaxLoad, o.CriticalLoad, o.CriticalLoadGrace
	c.flagFile, c.panicFile, c.postponeFile = o.ThrottleFlagFile, o.PanicFlagFile, o.PostponeCutOverFlagFile
	c.throttleQuery = o.ThrottleQuery
	c.niceRatio = o.NiceRatio
	c.rateCap.SetRate(o.MaxCopyRate)
	c.minRate = o.MinCopyRate
}

// control returns the migration's Control (a private one if none was given).
func (m *migrator) control() *Control {
	if m.rt.Control == nil {
		m.rt.Control = NewControl()
	}
	m.rt.Control.init(m.opts)
	return m.rt.Control
}

func (c *Control) setPhase(p string) {
	c.mu.Lock()
	c.phase = p
	c.cutting.Store(p == status.PhaseCutOver)
	c.mu.Unlock()
}

// ObserveBlockers records the sessions blocking the cut-over's metadata
// lock (mdl.Policy.Observe). Safe on a nil Control.
func (c *Control) ObserveBlockers(bs []mdl.Blocker) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.blockers = append([]mdl.Blocker(nil), bs...)
	c.mu.Unlock()
}

// throttleWait is the copier's Throttle hook.
func (c *Control) throttleWait(ctx context.Context) error {
	if th := c.th.Load(); th != nil {
		return th.Wait(ctx)
	}
	return nil
}

// checksumThrottleWait is the checksum's Throttle hook: the throttle's
// reasons but replica lag hold it (throttle.WaitReads). The checksum only
// reads the primary, and each pause keeps its two snapshots open longer.
func (c *Control) checksumThrottleWait(ctx context.Context) error {
	if th := c.th.Load(); th != nil {
		return th.WaitReads(ctx)
	}
	return nil
}

// pace is the copier's Pace hook: the sleep after a chunk of rows rows that
// took took, the longest of --nice-ratio's, the pacer's
// (--max-latency-ratio; pacedPause) and --max-copy-rate's (while it applies:
// rateCapped).
func (c *Control) pace(ctx context.Context, took time.Duration, rows int64) error {
	c.mu.Lock()
	c.pushChunkTime()
	capped := c.rateCapped()
	floor, cp := c.minRate, c.cp
	c.mu.Unlock()
	threads := 0
	if cp != nil {
		threads, _, _, _ = cp.Settings()
	} else {
		floor = 0
	}
	d := c.pacedPause(took, rows, threads, floor)
	if capped {
		d = max(d, c.rateCap.PauseFor(rows, took, time.Now()))
	}
	return throttle.Sleep(ctx, d)
}

// checksumPace is the checksum's Pace hook (checksum.Config.Pace): the
// pause after a chunk whose sums took took (pacedPause), the pacer's no
// longer than what keeps the checksum at ChecksumFloorFactor ×
// --min-copy-rate rows a second, and never under MinChecksumRate.
// --max-copy-rate counts copied rows and does not apply.
func (c *Control) checksumPace(ctx context.Context, took time.Duration, rows int64) error {
	c.mu.Lock()
	floor := max(c.minRate*ChecksumFloorFactor, MinChecksumRate)
	c.mu.Unlock()
	return throttle.Sleep(ctx, c.pacedPause(took, rows, 1, floor))
}

// pacedPause is the pause after a piece of work of rows rows that took
// took, done by one of threads threads: the longer of --nice-ratio's sleep
// and the pacer's, the pacer's no longer than what keeps the threads
// together at floor rows a second (floorPause; 0: no floor; none while the
// pacer holds the work to measure its baseline). Without a pacer, only
// --nice-ratio's.
func (c *Control) pacedPause(took time.Duration, rows int64, threads int, floor float64) time.Duration {
	c.mu.Lock()
	d := niceSleep(took, c.niceRatio)
	c.mu.Unlock()
	if p := c.pacer(); p != nil {
		pd := p.PauseFor(took)
		if floor > 0 && !p.State().Measuring {
			pd = min(pd, floorPause(rows, took, threads, floor))
		}
		d = max(d, pd)
	}
	return d
}

// MinChecksumRate: the pacer never slows the checksum below this many rows
// a second, even with --min-copy-rate 0. The checksum holds two REPEATABLE
// READ snapshots open while it runs, and every change the application
// commits meanwhile stays in the undo log until they end (1M rows: at most
// about 17 minutes).
const MinChecksumRate = 1000

// ChecksumFloorFactor: the checksum's floor is this many times
// --min-copy-rate. A compared row costs the server far less than a copied
// one (two reads and a hash, against a read, a write, its redo and binlog,
// and every replica's replay of it): on the bench's table, at idle, the
// copy took 11 s for 1M rows with 2 threads and the checksum 4 s with its
// two sums at once.
const ChecksumFloorFactor = 10

// checksumGentle is the checksum's Gentle hook: the application is to be
// spared while the copy would run short chunks (holdingBack).
func (c *Control) checksumGentle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holdingBack()
}

// checksumProgress is the checksum's Progress hook.
func (c *Control) checksumProgress(rows int64, done bool) {
	c.checked.Store(rows)
	c.mu.Lock()
	c.checkStarted = true
	c.checkDone = done
	c.mu.Unlock()
}

// floorPause is the longest pause after a chunk of rows rows that took took
// with which threads copy threads together still copy floor rows a second
// (--min-copy-rate).
func floorPause(rows int64, took time.Duration, threads int, floor float64) time.Duration {
	period := time.Duration(float64(max(threads, 1)) * float64(max(rows, 1)) / floor * float64(time.Second))
	return max(period-took, 0)
}

// rateCapped tells whether --max-copy-rate holds the copy now: it is set,
// and the application may be active (the pacer's view; without a pacer,
// --max-latency-ratio 0, always). c.mu is held.
func (c *Control) rateCapped() bool {
	if c.rateCap.Rate() <= 0 {
		return false
	}
	if c.thr == nil || c.thr.Pacer() == nil {
		return true
	}
	return c.thr.Pacer().AppActive()
}

// PacedChunkTime is the copy's chunk time while the pacer holds it back
// with the application active, or --max-copy-rate does (--chunk-time when
// shorter): a chunk keeps
// the server's CPUs and its commit path busy for its whole length, and an
// application transaction that meets it waits about that long, so a paced
// copy runs many short chunks rather than a few long ones. On the 1M-row
// bench (light load, --max-latency-ratio 2) 10 ms chunks gave the
// application ×4.6 its p99 against ×12 with 200 ms ones, for about the
// same wall time (docs/benchmarks.md).
const PacedChunkTime = 10 * time.Millisecond

// holdingBack tells whether the copy is held back now, the application to
// be spared: the pacer holds it (the application active) or --max-copy-rate
// applies; c.mu is held.
func (c *Control) holdingBack() bool {
	return (c.thr != nil && c.thr.Pacer() != nil && c.thr.Pacer().Holding()) || c.rateCapped()
}

// pushChunkTime gives the copier the chunk time to aim at: --chunk-time,
// or PacedChunkTime while the copy is paced or rate-capped; c.mu is held.
func (c *Control) pushChunkTime() {
	if c.cp == nil {
		return
	}
	want := c.chunkTime
	if c.holdingBack() {
		want = min(want, PacedChunkTime)
	}
	if want != c.copyChunkTime {
		c.cp.SetChunkTime(want)
		c.copyChunkTime = want
	}
}

// syncChunkTime gives the copier the chunk time to aim at now
// (pushChunkTime); pace does after each chunk, and the copy calls it
// before its first.
func (c *Control) syncChunkTime() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pushChunkTime()
}

// niceSleep is --nice-ratio's sleep after a chunk that took took.
func niceSleep(took time.Duration, ratio float64) time.Duration {
	if ratio <= 0 || took <= 0 {
		return 0
	}
	return time.Duration(float64(took) * ratio)
}

// pacer is the throttle runtime's pacer, nil when the copy is not paced.
func (c *Control) pacer() *throttle.Pacer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.thr == nil {
		return nil
	}
	return c.thr.Pacer()
}

// applierDelay is the pump's delay hook: none during the cut-over, nor
// while the applier is told to run at full speed. It takes no lock (the
// pump may ask it per event under back-pressure).
func (c *Control) applierDelay() time.Duration {
	th := c.th.Load()
	if th == nil || c.cutting.Load() || c.fullSpeed.Load() {
		return 0
	}
	return th.ApplierDelay()
}

// setFullSpeed tells the applier to run without the throttle's delay (the
// pump asks applierDelay before each window), or lets the delay apply again.
func (c *Control) setFullSpeed(on bool) { c.fullSpeed.Store(on) }

// setCutOverNote sets what the status says the cut-over waits for ("" when
// it does not wait).
func (c *Control) setCutOverNote(note string) {
	c.mu.Lock()
	c.cutNote = note
	c.mu.Unlock()
}

// setEstimate replaces the row estimate (--exact-rowcount's count).
func (c *Control) setEstimate(n int64) {
	c.mu.Lock()
	c.estimate = n
	c.mu.Unlock()
}

// pipelineParts are the running copy pipeline's parts the Control shows
// and steers.
type pipelineParts struct {
	cp           *copier.Copier
	ap           *pipeline.Applier
	pump         *pipeline.Pump
	estimate     int64 // rows (table statistics)
	copiedBefore int64 // rows a resumed run's predecessors copied
}

// start runs the throttle runtime (replica discovery, heartbeat,
// throttler; package throttle) and the meter for the copy pipeline until
// ctx ends; abort cancels the pipeline. stop ends them and drops the
// heartbeat table.
func (c *Control) start(ctx context.Context, m *migrator, abort context.CancelCauseFunc, p pipelineParts) (stop func(), err error) {
	o := m.opts
	c.mu.Lock()
	c.copiedBefore, c.cancelRun = p.copiedBefore, abort
	c.cp, c.ap, c.pump, c.estimate, c.db = p.cp, p.ap, p.pump, p.estimate, m.db
	aborted := c.aborted
	cfg := throttle.RuntimeConfig{
		Primary: m.db, Conn: o.Conn, Schema: o.Database, HeartbeatTable: HeartbeatName(o.Table), Replicas: o.Replicas,
		MaxLag: c.maxLag, MaxLoad: c.maxLoad, CriticalLoad: c.critical, CriticalLoadGrace: c.grace,
		FlagFile: c.flagFile, PanicFile: c.panicFile, Query: c.throttleQuery, HTTP: o.ThrottleHTTP, HTTPTimeout: o.ThrottleHTTPTimeout,
		Abort: c.abort, Logger: m.rt.Logger, PaceRatio: o.MaxLatencyRatio, AppWrites: m.appRows.Load,
		AppWritesReady: m.appAtStart.Load,
	}
	if !(c.threads == o.Threads && c.chunkTime == o.ChunkTime && c.maxChunkRows == o.MaxChunkRows) {
		p.cp.SetThreads(c.threads) // changed before the copy started
		p.cp.SetChunkBounds(min(100, c.maxChunkRows), c.maxChunkRows)
	}
	c.copyChunkTime = o.ChunkTime // the copier's, from the options
	c.pushChunkTime()
	c.mu.Unlock()
	if aborted != nil {
		abort(aborted)
	}
	thr, err := throttle.Start(ctx, cfg)
	if err != nil {
		c.detach()
		return nil, err
	}
	th := thr.Throttler()
	c.pauseMu.Lock()
	c.mu.Lock()
	c.thr = thr
	c.th.Store(th)
	paused := c.paused
	c.mu.Unlock()
	if paused {
		th.Pause() // outside c.mu: a decision may call back (abort)
	}
	c.pauseMu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	thr.Run(ctx) // decides before the first chunk
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.runMeter(ctx, m.db) }()
	return func() {
		cancel()
		wg.Wait()
		c.detach()
		thr.Stop(context.WithoutCancel(ctx))
	}, nil
}

// detach forgets the pipeline's cancel function (the pipeline has ended).
func (c *Control) detach() {
	c.mu.Lock()
	c.cancelRun = nil
	c.mu.Unlock()
}

// abort stops the migration with err as the cause.
func (c *Control) abort(err error) {
	c.mu.Lock()
	if c.aborted == nil {
		c.aborted = err
	}
	cancel := c.cancelRun
	if cancel == nil {
		cancel = c.cancelOuter
	}
	c.mu.Unlock()
	if cancel != nil {
		cancel(err)
	}
}

// --- status.Controller ---

var _ status.Controller = (*Control)(nil)

func (c *Control) ended() error {
	if c.phase == status.PhaseDone || c.phase == status.PhaseFailed {
		return fmt.Errorf("the migration has ended (%s)", c.phase)
	}
	return nil
}

// Pause pauses the row copy (the chunks in flight finish).
func (c *Control) Pause() error { return c.setPaused(true) }

// Resume ends Pause.
func (c *Control) Resume() error { return c.setPaused(false) }

func (c *Control) setPaused(paused bool) error {
	c.pauseMu.Lock()
	defer c.pauseMu.Unlock()
	c.mu.Lock()
	if err := c.ended(); err != nil {
		c.mu.Unlock()
		return err
	}
	c.paused = paused
	th := c.th.Load()
	c.mu.Unlock()
	switch {
	case th == nil:
	case paused:
		th.Pause()
	default:
		th.Resume()
	}
	return nil
}

// Abort stops the migration: before the cut-over the original table is
// untouched and the helper tables are dropped.
func (c *Control) Abort(reason string) error {
	c.mu.Lock()
	err := c.ended()
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.abort(fmt.Errorf("%w: %s", ErrAborted, reason))
	return nil
}

// Unpostpone removes the postpone flag file: the cut-over goes ahead as
// soon as the ghost is ready.
func (c *Control) Unpostpone() error {
	c.mu.Lock()
	f := c.postponeFile
	err := c.ended()
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if f == "" {
		return errors.New("the cut-over is not postponed (no --postpone-cut-over-flag-file): it happens as soon as the new table is ready")
	}
	if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the postpone flag file: %w", err)
	}
	return nil
}

// Set changes a setting at run time (settings.LiveKeys; each checked by
// its definition in package settings, as Options.Validate checks it).
func (c *Control) Set(key, value string) error {
	key, value = settings.Key(key), strings.TrimSpace(value)
	if key == "max-load" || key == "critical-load" {
		return c.setLoad(key, value)
	}
	// The throttler is told after the lock is released: its decision may
	// call back (abort).
	var after func()
	defer func() {
		if after != nil {
			after()
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ended(); err != nil {
		return err
	}
	th := c.th.Load()
	switch key {
	case settings.Threads.Name:
		n, err := settings.Threads.Parse(value)
		if err != nil {
			return err
		}
		c.threads = min(n, copier.MaxThreads)
		if c.cp != nil {
			c.cp.SetThreads(c.threads)
		}
	case settings.ChunkTime.Name:
		d, err := settings.ChunkTime.Parse(value)
		if err != nil {
			return err
		}
		c.chunkTime = d
		c.pushChunkTime()
	case settings.MaxChunkRows.Name:
		n, err := settings.MaxChunkRows.Parse(value)
		if err != nil {
			return err
		}
		c.maxChunkRows = n
		if c.cp != nil {
			c.cp.SetChunkBounds(min(100, n), n)
		}
	case settings.MaxLag.Name:
		d, err := settings.MaxLag.Parse(value)
		if err != nil {
			return err
		}
		if d > 0 && c.thr != nil && !c.thr.LagWatched() {
			return errors.New("max-lag: replica lag is not watched in this run (it started with --max-lag 0, or no replica was found)")
		}
		c.maxLag = d
		if th != nil {
			after = func() { th.SetMaxLag(d) }
		}
	case "max-latency-ratio", "nice-ratio", "max-copy-rate", "min-copy-rate":
		return c.setPacing(key, value)
	case "throttle-query":
		// gh-ost's throttle-query=: from the next poll on (empty: none).
		c.throttleQuery = value
		if c.thr != nil {
			c.thr.SetQuery(value)
		}
	default:
		return fmt.Errorf("unknown setting %q: settable are %s", key, strings.Join(settings.LiveKeys, ", "))
	}
	return nil
}

// setPacing sets max-latency-ratio, nice-ratio, max-copy-rate or
// min-copy-rate; c.mu is
// held.
func (c *Control) setPacing(key, value string) error {
	r, err := strconv.ParseFloat(value, 64)
	if err != nil {
		return fmt.Errorf("%s=%s: want a number", key, value)
	}
	if key == "nice-ratio" {
		if err := settings.NiceRatio(r); err != nil {
			return err
		}
		c.niceRatio = r
		return nil
	}
	if key == "min-copy-rate" {
		if err := settings.MinCopyRate(r); err != nil {
			return err
		}
		c.minRate = r
		return nil
	}
	if key == "max-copy-rate" {
		if err := settings.CopyRate(r); err != nil {
			return err
		}
		c.rateCap.SetRate(r)
		c.pushChunkTime()
		return nil
	}
	if err := settings.LatencyRatio(r); err != nil {
		return err
	}
	if c.thr == nil || c.thr.Pacer() == nil {
		return errors.New("max-latency-ratio: this run has no latency probe (it started with --max-latency-ratio 0; start it without that to pace the copy)")
	}
	c.thr.Pacer().SetRatio(r)
	c.pushChunkTime()
	return nil
}

// setLoad sets max-load or critical-load. A misspelt variable would
// throttle forever: the server is asked first.
func (c *Control) setLoad(key, value string) error {
	limits, err := throttle.ParseThresholds(value)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	c.mu.Lock()
	db := c.db
	c.mu.Unlock()
	if db != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := throttle.CheckLoadNames(ctx, db, limits); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	c.mu.Lock()
	if err := c.ended(); err != nil {
		c.mu.Unlock()
		return err
	}
	if key == "max-load" {
		c.maxLoad = limits
	} else {
		c.critical = limits
	}
	th := c.th.Load()
	c.mu.Unlock()
	switch {
	case th == nil:
	case key == "max-load":
		th.SetMaxLoad(limits)
	default:
		th.SetCriticalLoad(limits)
	}
	return nil
}
