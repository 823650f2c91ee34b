package migration

// Live control: throttling, status, runtime settings, abort.
//
// A Control shows one migration and steers it. The CLI makes one, serves it
// over HTTP and a unix socket (package status) and runs the migration with
// Control.Run; a migration run without one gets a private Control (it
// still throttles and prints progress). During the copy method's pipeline
// (execute.go) the Control owns the throttler (package throttle), the
// heartbeat that measures replica lag, and a meter that samples the
// counters once a second for rates, the ETA and the status page's charts.

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
	"time"

	"github.com/recast-osc/recast/internal/apply"
	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/copier"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/mdl"
	"github.com/recast-osc/recast/internal/status"
	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/throttle"
)

// HeartbeatName is the heartbeat table of table t (replica lag).
func HeartbeatName(t string) string { return "_" + t + "_hb" }

// ErrAborted is wrapped by the error of a migration stopped by Abort, the
// panic flag file or a critical load.
var ErrAborted = throttle.ErrAbort

// heartbeatInterval is how often the heartbeat row is written.
const heartbeatInterval = 100 * time.Millisecond

// historyLen is how many one-second samples the status page can chart.
const historyLen = 900

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
	threads      int
	chunkTime    time.Duration
	maxChunkRows int
	maxLag       time.Duration
	maxLoad      throttle.Thresholds
	critical     throttle.Thresholds
	grace        time.Duration
	flagFile     string
	panicFile    string
	postponeFile string
	paused       bool
	lagWatched   bool // the heartbeat runs (replicas found, max-lag > 0 at the start)

	cancelOuter context.CancelCauseFunc // Control.Run's context
	cancelRun   context.CancelCauseFunc // the copy pipeline's (execute.go)
	aborted     error

	// The running pipeline (nil outside the copy method).
	cp       *copier.Copier
	ap       *apply.Applier
	pump     *pump
	th       *throttle.Throttler
	db       *sql.DB // the primary (validating load variables)
	estimate int64
	blockers []mdl.Blocker
	// copiedBefore: rows a resumed run's predecessors copied (progress
	// counts them).
	copiedBefore int64
	// fullSpeed: the applier runs without the throttle's delay (set for the
	// cut-over: its last catch-up and the drain under lock).
	fullSpeed bool
	// cutNote says what the cut-over waits for before requesting the lock.
	cutNote string

	samples []sample // the meter's, oldest first
}

// sample is one reading of the counters.
type sample struct {
	at                time.Time
	rows              int64
	received, applied int64
	written           int64
	endBytes          int64 // absolute binlog offset of the end (-1 unknown)
	appliedBytes      int64 // absolute binlog offset applied (-1 unknown)
	throttled         bool
	lags              map[string]float64
	phase             string
}

// NewControl returns a Control; Run runs a migration under it.
func NewControl() *Control {
	return &Control{phase: status.PhaseInspect, started: time.Now()}
}

// Run runs the migration described by opts under c (see migration.Run):
// phases, failures and aborts show in c.Status().
func (c *Control) Run(ctx context.Context, opts Options) (*Result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c.mu.Lock()
	c.cancelOuter = cancel
	c.started = time.Now()
	c.phase = status.PhaseInspect
	c.mu.Unlock()
	c.init(opts)
	opts.Control = c
	res, err := Run(ctx, opts)
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
}

// control returns the migration's Control (a private one if none was given).
func (m *migrator) control() *Control {
	if m.opts.Control == nil {
		m.opts.Control = NewControl()
	}
	m.opts.Control.init(m.opts)
	return m.opts.Control
}

func (c *Control) setPhase(p string) {
	c.mu.Lock()
	c.phase = p
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
	c.mu.Lock()
	th := c.th
	c.mu.Unlock()
	if th == nil {
		return nil
	}
	return th.Wait(ctx)
}

// applierDelay is the pump's delay hook: none during the cut-over, nor
// while the applier is told to run at full speed.
func (c *Control) applierDelay() time.Duration {
	c.mu.Lock()
	th, phase, full := c.th, c.phase, c.fullSpeed
	c.mu.Unlock()
	if th == nil || phase == status.PhaseCutOver || full {
		return 0
	}
	return th.ApplierDelay()
}

// setFullSpeed tells the applier to run without the throttle's delay (the
// pump asks applierDelay before each window), or lets the delay apply again.
func (c *Control) setFullSpeed(on bool) {
	c.mu.Lock()
	c.fullSpeed = on
	c.mu.Unlock()
}

// setCutOverNote sets what the status says the cut-over waits for ("" when
// it does not wait).
func (c *Control) setCutOverNote(note string) {
	c.mu.Lock()
	c.cutNote = note
	c.mu.Unlock()
}

// start runs the throttle (replica discovery, heartbeat, throttler) and
// the meter for the copy pipeline until ctx ends; abort cancels the
// pipeline. stop ends them and drops the heartbeat table.
func (c *Control) start(ctx context.Context, m *migrator, abort context.CancelCauseFunc, cp *copier.Copier, ap *apply.Applier, p *pump, estimate, copiedBefore int64) (stop func(), err error) {
	o := m.opts
	c.mu.Lock()
	c.copiedBefore = copiedBefore
	c.cancelRun = abort
	c.cp, c.ap, c.pump, c.estimate, c.db = cp, ap, p, estimate, m.db
	aborted, maxLag := c.aborted, c.maxLag
	c.mu.Unlock()
	if aborted != nil {
		abort(aborted)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var hb *throttle.Heartbeat
	var replicaDBs []*sql.DB
	stopAll := func() {
		cancel()
		wg.Wait()
		c.mu.Lock()
		c.cancelRun = nil
		c.mu.Unlock()
		for _, db := range replicaDBs {
			db.Close()
		}
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer dcancel()
		drop := hb
		if drop == nil {
			// One a killed run left (this run, resumed, does not watch lag).
			var n int
			err := m.db.QueryRowContext(dctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
				o.Database, HeartbeatName(o.Table)).Scan(&n)
			if err == nil && n > 0 {
				drop = throttle.NewHeartbeat(m.db, table.QuoteIdent(o.Database)+"."+table.QuoteIdent(HeartbeatName(o.Table)), 0, nil)
			}
		}
		if drop != nil {
			if err := drop.Drop(dctx); err != nil {
				o.Logger.Warn("dropping the heartbeat table failed; recast cleanup removes it", "table", drop.Table(), "err", err)
			}
		}
	}
	defer func() {
		if err != nil {
			stopAll()
		}
	}()

	var replicas []throttle.Replica
	if maxLag > 0 {
		addrs, err := m.replicaAddrs(ctx)
		if err != nil {
			return nil, err
		}
		if len(addrs) > 0 {
			hb = throttle.NewHeartbeat(m.db, table.QuoteIdent(o.Database)+"."+table.QuoteIdent(HeartbeatName(o.Table)), heartbeatInterval, o.Logger)
			if err := hb.Create(ctx); err != nil {
				return nil, err
			}
			wg.Add(1)
			go func() { defer wg.Done(); hb.Run(ctx) }()
			for _, a := range addrs {
				db, err := replicaDB(o.Conn, a)
				if err != nil {
					return nil, err
				}
				replicaDBs = append(replicaDBs, db)
				replicas = append(replicas, hb.Replica(a, db))
			}
			waitBeat(ctx, replicas, time.Second)
			o.Logger.Info("watching replica lag", "replicas", addrs, "max_lag", maxLag, "heartbeat", hb.Table())
		} else {
			o.Logger.Info("no replicas found (SHOW SLAVE HOSTS): replica lag is not watched")
		}
	}
	c.mu.Lock()
	th := throttle.New(throttle.Config{
		Load: throttle.StatusReader(m.db), MaxLoad: c.maxLoad, CriticalLoad: c.critical, CriticalLoadGrace: c.grace,
		Replicas: replicas, MaxLag: c.maxLag, FlagFile: c.flagFile, PanicFile: c.panicFile,
		Abort: func(err error) { c.abort(err) }, Logger: o.Logger,
	})
	c.lagWatched = hb != nil
	limits := append(append(throttle.Thresholds{}, c.maxLoad...), c.critical...)
	if !(c.threads == o.Threads && c.chunkTime == o.ChunkTime && c.maxChunkRows == o.MaxChunkRows) {
		cp.SetThreads(c.threads) // changed before the copy started
		cp.SetChunkTime(c.chunkTime)
		cp.SetChunkBounds(min(100, c.maxChunkRows), c.maxChunkRows)
	}
	c.mu.Unlock()
	if err := checkLoadNames(ctx, m.db, limits); err != nil {
		return nil, err
	}
	c.pauseMu.Lock()
	c.mu.Lock()
	c.th = th
	paused := c.paused
	c.mu.Unlock()
	if paused {
		th.Pause() // outside c.mu: a decision may call back (abort)
	}
	c.pauseMu.Unlock()
	th.Prime(ctx) // decide before the first chunk
	wg.Add(2)
	go func() { defer wg.Done(); th.Run(ctx) }()
	go func() { defer wg.Done(); c.meter(ctx, m.db) }()
	return stopAll, nil
}

// waitBeat waits (at most d) until every replica shows the heartbeat, so
// that the table's creation replicating is not taken for lag.
func waitBeat(ctx context.Context, replicas []throttle.Replica, d time.Duration) {
	deadline := time.Now().Add(d)
	for _, r := range replicas {
		for time.Now().Before(deadline) {
			rctx, cancel := context.WithTimeout(ctx, time.Until(deadline))
			_, err := r.Lag(rctx)
			cancel()
			if err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// replicaAddrs are the replicas to watch: --replica, or those the primary
// lists.
func (m *migrator) replicaAddrs(ctx context.Context) ([]string, error) {
	o := m.opts
	if len(o.Replicas) > 0 {
		return o.Replicas, nil
	}
	found, err := throttle.DiscoverReplicas(ctx, m.db, o.Conn.Host, o.Conn.Port)
	if err != nil {
		return nil, fmt.Errorf("%w (name the replicas with --replica HOST:PORT, or --max-lag 0 to ignore replica lag)", err)
	}
	var out []string
	for _, d := range found {
		out = append(out, d.Addr)
		if d.Via == "processlist" {
			o.Logger.Warn("replica found in the processlist; its port is assumed to be the primary's (name it with --replica HOST:PORT if wrong)", "replica", d.Addr)
		}
	}
	return out, nil
}

// replicaDB is a small pool on a replica, with the primary's credentials.
// It connects on first use: a replica that cannot be reached counts as
// lagging, with the reason.
func replicaDB(conn dbconn.Config, addr string) (*sql.DB, error) {
	host, port, err := throttle.ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	conn.Host, conn.Port, conn.Schema, conn.MaxOpen = host, port, "", 2
	return dbconn.OpenLazy(conn)
}

// checkLoadNames fails when a --max-load/--critical-load variable is not a
// numeric global status variable of the server (a typo would throttle
// forever).
func checkLoadNames(ctx context.Context, db *sql.DB, th throttle.Thresholds) error {
	if len(th) == 0 {
		return nil
	}
	vals, err := throttle.StatusReader(db)(ctx, th.Names())
	if err != nil {
		return fmt.Errorf("read the server's status variables: %w", err)
	}
	for _, l := range th {
		if _, ok := vals[strings.ToLower(l.Var)]; !ok {
			return fmt.Errorf("%s is not a numeric status variable of the server (SHOW GLOBAL STATUS)", l.Var)
		}
	}
	return nil
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
	th := c.th
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

// Set changes a setting at run time (status.SettableKeys).
func (c *Control) Set(key, value string) error {
	key = strings.ToLower(strings.TrimSpace(key))
	value = strings.TrimSpace(value)
	if key == "max-load" || key == "critical-load" {
		// A misspelt variable would throttle forever: ask the server first.
		th, err := throttle.ParseThresholds(value)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		c.mu.Lock()
		db := c.db
		c.mu.Unlock()
		if db != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := checkLoadNames(ctx, db, th); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
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
	th := c.th
	dur := func() (time.Duration, error) {
		d, err := time.ParseDuration(value)
		if err != nil {
			return 0, fmt.Errorf("%s=%s: want a duration like 500ms or 2s", key, value)
		}
		return d, nil
	}
	num := func(lo, hi int) (int, error) {
		n, err := strconv.Atoi(value)
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("%s=%s: want a number from %d to %d", key, value, lo, hi)
		}
		return n, nil
	}
	switch key {
	case "threads":
		n, err := num(1, copier.MaxThreads)
		if err != nil {
			return err
		}
		c.threads = n
		if c.cp != nil {
			c.cp.SetThreads(n)
		}
	case "chunk-time":
		d, err := dur()
		if err != nil {
			return err
		}
		if d < time.Millisecond || d > time.Minute {
			return fmt.Errorf("chunk-time=%s: want 1ms to 1m", value)
		}
		c.chunkTime = d
		if c.cp != nil {
			c.cp.SetChunkTime(d)
		}
	case "max-chunk-rows", "chunk-size":
		n, err := num(1, 10_000_000)
		if err != nil {
			return err
		}
		c.maxChunkRows = n
		if c.cp != nil {
			c.cp.SetChunkBounds(min(100, n), n)
		}
	case "max-lag":
		d, err := dur()
		if err != nil {
			return err
		}
		if d < 0 {
			return fmt.Errorf("max-lag=%s: negative", value)
		}
		if d > 0 && c.th != nil && !c.lagWatched {
			return errors.New("max-lag: replica lag is not watched in this run (it started with --max-lag 0, or no replica was found)")
		}
		c.maxLag = d
		if th != nil {
			after = func() { th.SetMaxLag(d) }
		}
	case "max-load", "critical-load":
		limits, err := throttle.ParseThresholds(value)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		if key == "max-load" {
			c.maxLoad = limits
			if th != nil {
				after = func() { th.SetMaxLoad(limits) }
			}
		} else {
			c.critical = limits
			if th != nil {
				after = func() { th.SetCriticalLoad(limits) }
			}
		}
	default:
		return fmt.Errorf("unknown setting %q: settable are %s", key, strings.Join(status.SettableKeys, ", "))
	}
	return nil
}

// --- the meter: rates, ETA, history ---

// rateWindow is the span rates are measured over.
const rateWindow = 5 * time.Second

// meter samples the counters every second until ctx ends.
func (c *Control) meter(ctx context.Context, db *sql.DB) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		c.takeSample(ctx, db)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Control) takeSample(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	cp, ap, p, th, phase := c.cp, c.ap, c.pump, c.th, c.phase
	c.mu.Unlock()
	if cp == nil {
		return
	}
	c.mu.Lock()
	before := c.copiedBefore
	c.mu.Unlock()
	s := sample{at: time.Now(), rows: before + cp.Progress().Rows, phase: phase, endBytes: -1, appliedBytes: -1}
	st := ap.Stats()
	s.received, s.written, s.applied = st.Changes, st.Rows, p.applied.Load()
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if logs, err := binaryLogs(qctx, db); err == nil {
		s.endBytes = logs.end()
		s.appliedBytes = logs.abs(ap.Applied())
	}
	cancel()
	if th != nil {
		ts := th.State()
		s.throttled = ts.Throttled
		for _, r := range ts.Replicas {
			if r.Err == "" && !r.At.IsZero() {
				if s.lags == nil {
					s.lags = map[string]float64{}
				}
				s.lags[r.Name] = r.Lag.Seconds()
			}
		}
	}
	c.mu.Lock()
	c.samples = append(c.samples, s)
	if len(c.samples) > historyLen {
		c.samples = append(c.samples[:0], c.samples[len(c.samples)-historyLen:]...)
	}
	c.mu.Unlock()
}

type binlogFile struct {
	name string
	size int64
}

type binlogFiles []binlogFile

func binaryLogs(ctx context.Context, db *sql.DB) (binlogFiles, error) {
	rows, err := db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out binlogFiles
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		n, _ := strconv.ParseInt(string(vals[1]), 10, 64)
		out = append(out, binlogFile{string(vals[0]), n})
	}
	return out, rows.Err()
}

// end is the absolute offset of the binlog's end (bytes of all files).
func (f binlogFiles) end() int64 {
	var n int64
	for _, b := range f {
		n += b.size
	}
	return n
}

// abs is pos as an absolute offset over the files listed (-1: not listed).
func (f binlogFiles) abs(pos binlog.Position) int64 {
	var n int64
	for _, b := range f {
		if b.name == pos.File {
			return n + int64(pos.Offset)
		}
		n += b.size
	}
	return -1
}

// rates over the last rateWindow of samples.
type rates struct {
	copy, incoming, applied float64 // per second
	binlogIn, binlogApplied float64 // bytes per second (-1 unknown)
}

func (c *Control) ratesLocked() rates {
	r := rates{binlogIn: -1, binlogApplied: -1}
	n := len(c.samples)
	if n < 2 {
		return r
	}
	last := c.samples[n-1]
	first := c.samples[0]
	for i := n - 2; i >= 0; i-- {
		first = c.samples[i]
		if last.at.Sub(first.at) >= rateWindow {
			break
		}
	}
	dt := last.at.Sub(first.at).Seconds()
	if dt <= 0 {
		return r
	}
	r.copy = float64(last.rows-first.rows) / dt
	r.incoming = float64(last.received-first.received) / dt
	r.applied = float64(last.applied-first.applied) / dt
	if first.endBytes >= 0 && last.endBytes >= 0 && first.appliedBytes >= 0 && last.appliedBytes >= 0 {
		r.binlogIn = float64(last.endBytes-first.endBytes) / dt
		r.binlogApplied = float64(last.appliedBytes-first.appliedBytes) / dt
	}
	return r
}

// History returns the one-second samples for the status page.
func (c *Control) History() []status.Sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]status.Sample, 0, len(c.samples))
	for i, s := range c.samples {
		h := status.Sample{Time: float64(s.at.UnixMilli()) / 1000, Phase: s.phase, Percent: c.percent(s.rows, s.phase),
			BacklogEvents: max(s.received-s.applied, 0), Lags: s.lags, Throttled: s.throttled}
		if i > 0 {
			p := c.samples[i-1]
			if dt := s.at.Sub(p.at).Seconds(); dt > 0 {
				h.CopyRate = float64(s.rows-p.rows) / dt
				h.IncomingRate = float64(s.received-p.received) / dt
				h.AppliedRate = float64(s.applied-p.applied) / dt
			}
		}
		out = append(out, h)
	}
	return out
}

func (c *Control) percent(rows int64, phase string) float64 {
	if c.cp != nil && c.cp.Progress().Done && rows == c.copiedBefore+c.cp.Progress().Rows {
		return 100
	}
	if phase != status.PhaseInspect && phase != status.PhaseCopy {
		return 100
	}
	if c.estimate <= 0 {
		return 0
	}
	return min(100*float64(rows)/float64(c.estimate), 99.9)
}

// Status returns the current snapshot.
func (c *Control) Status() status.Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	s := status.Snapshot{
		Table: c.table, Alter: c.alter, Phase: c.phase, Error: c.err, StartedAt: c.started, UpdatedAt: now,
		ElapsedSeconds: now.Sub(c.started).Seconds(),
		Replicas:       []status.Replica{}, MDLBlockers: []status.Blocker{},
	}
	if !c.finished.IsZero() {
		f := c.finished
		s.Done = &f
		s.ElapsedSeconds = f.Sub(c.started).Seconds()
	}
	s.Settings = status.Settings{
		Threads: c.threads, ChunkTime: c.chunkTime.String(), MaxChunkRows: c.maxChunkRows,
		MaxLag: c.maxLag.String(), MaxLoad: c.maxLoad.String(), CriticalLoad: c.critical.String(), CriticalLoadGrace: c.grace.String(),
		ThrottleFlagFile: c.flagFile, PanicFlagFile: c.panicFile, PostponeFlagFile: c.postponeFile,
	}
	if c.postponeFile != "" {
		_, err := os.Stat(c.postponeFile)
		s.Postponed = err == nil
	}
	// Filled by ObserveBlockers (mdl.Policy.Observe, instant.go).
	for _, b := range c.blockers {
		s.MDLBlockers = append(s.MDLBlockers, status.Blocker{ID: b.ID, User: b.User, Host: b.Host, Command: b.Command, State: b.State,
			Statement: b.Statement, Seconds: b.Age().Seconds(), InTrx: b.InTrx})
	}
	r := c.ratesLocked()
	if c.cp != nil {
		pr := c.cp.Progress()
		rows := c.copiedBefore + pr.Rows
		s.Copy = status.Copy{RowsCopied: rows, RowsEstimated: c.estimate, Percent: c.percent(rows, c.phase),
			RowsPerSecond: r.copy, Chunks: pr.Chunks, ChunkSize: pr.ChunkSize, InFlight: pr.InFlight, Done: pr.Done}
	}
	if c.ap != nil {
		st := c.ap.Stats()
		applied := c.pump.applied.Load()
		s.Apply = status.Apply{IncomingPerSecond: r.incoming, AppliedPerSecond: r.applied,
			EventsReceived: st.Changes, EventsApplied: applied, RowsWritten: st.Rows,
			BacklogEvents: max(st.Changes-applied, 0), BacklogBytes: -1,
			BinlogBytesPerSecond: max(r.binlogIn, 0), BinlogAppliedBytesPerSecond: max(r.binlogApplied, 0)}
		if n := len(c.samples); n > 0 {
			if last := c.samples[n-1]; last.endBytes >= 0 && last.appliedBytes >= 0 {
				s.Apply.BacklogBytes = max(last.endBytes-last.appliedBytes, 0)
			}
		}
	}
	if c.th != nil {
		ts := c.th.State()
		s.Throttle = status.Throttle{Throttled: ts.Throttled, Reason: ts.Reason, ThrottledSeconds: ts.ThrottledFor.Seconds(), Paused: ts.Paused}
		if ts.Throttled {
			since := ts.Since
			s.Throttle.Since = &since
		}
		if !ts.CriticalSince.IsZero() {
			cs := ts.CriticalSince
			s.Throttle.CriticalSince = &cs
		}
		for _, rl := range ts.Replicas {
			sr := status.Replica{Name: rl.Name, Error: rl.Err, Lagging: rl.Lagging}
			if rl.Err == "" && !rl.At.IsZero() {
				v := rl.Lag.Seconds()
				sr.LagSeconds = &v
			}
			s.Replicas = append(s.Replicas, sr)
		}
		s.Apply.ApplierDelaySeconds = ts.ApplierDelay.Seconds()
	} else if c.paused {
		s.Throttle = status.Throttle{Throttled: true, Reason: "paused by operator", Paused: true}
	}
	s.Apply.Backlog, s.ETA = c.etaLocked(s, r)
	return s
}

// etaLocked estimates the time left. It is honest: it gives no number when
// there is no progress to extrapolate from, and when the applier does not
// gain on the binlog (the backlog would never drain) it says so.
func (c *Control) etaLocked(s status.Snapshot, r rates) (backlog string, eta status.ETA) {
	// The backlog, in binlog bytes (what is unread counts too): caught up
	// when what is left takes the binlog about a second to produce.
	backlog = "caught up"
	var drain float64 // seconds
	bb := s.Apply.BacklogBytes
	switch {
	case c.ap == nil:
	case bb < 0 || r.binlogIn < 0:
		if s.Apply.BacklogEvents > 0 && r.applied <= r.incoming && s.Apply.BacklogEvents > int64(r.incoming) {
			backlog = "not draining"
		}
	case float64(bb) <= max(256<<10, r.binlogIn):
	case r.binlogApplied > r.binlogIn:
		backlog = "draining"
		drain = float64(bb) / (r.binlogApplied - r.binlogIn)
	default:
		backlog = "not draining"
	}
	num := func(secs float64, text string) status.ETA {
		return status.ETA{Seconds: &secs, Text: text}
	}
	none := func(text string) status.ETA { return status.ETA{Text: text} }
	switch s.Phase {
	case status.PhaseDone:
		return backlog, num(0, "done")
	case status.PhaseFailed:
		return backlog, none("failed")
	case status.PhaseInspect:
		return backlog, none("unknown (inspecting)")
	}
	if backlog == "not draining" {
		return backlog, none(fmt.Sprintf("backlog not draining (applied %s/s ≤ incoming %s/s of binlog): no estimate",
			status.Bytes(int64(max(r.binlogApplied, 0))), status.Bytes(int64(max(r.binlogIn, 0)))))
	}
	switch s.Phase {
	case status.PhaseCopy:
		if s.Copy.Done {
			break
		}
		if s.Throttle.Throttled {
			return backlog, none("unknown: the copy is paused (" + s.Throttle.Reason + ")")
		}
		if r.copy <= 0 {
			return backlog, none("unknown (no copy progress measured yet)")
		}
		left := float64(max(s.Copy.RowsEstimated-s.Copy.RowsCopied, 0)) / r.copy
		text := "copy " + status.Seconds(left)
		if drain > 0 {
			text += " + backlog " + status.Seconds(drain)
		}
		return backlog, num(left+drain, text+", then checksum and cut-over")
	case status.PhaseChecksum:
		return backlog, none("checksum running (no estimate), then cut-over")
	case status.PhaseCutOver:
		if s.Postponed {
			return backlog, none("cut-over postponed until " + s.Settings.PostponeFlagFile + " is removed (recast ctl cutover)")
		}
		if c.cutNote != "" {
			return backlog, none(c.cutNote)
		}
		return backlog, none("cutting over")
	}
	// Copy done, catching up.
	if drain > 0 {
		return backlog, num(drain, "backlog "+status.Seconds(drain)+", then checksum and cut-over")
	}
	return backlog, num(0, "caught up: checksum and cut-over next")
}
