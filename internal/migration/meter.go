package migration

// The Control's view of a running migration: a reading of the counters
// once a second into a status.Meter (rates, history, ETA), and the status
// snapshot built from the parts and the meter.

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/status"
)

// runMeter reads the counters every second until ctx ends.
func (c *Control) runMeter(ctx context.Context, db *sql.DB) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		c.read(ctx, db)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// read takes one reading.
func (c *Control) read(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	cp, ap, p, phase, before, def := c.cp, c.ap, c.pump, c.phase, c.copiedBefore, c.copyLock.def
	regime := c.regime()
	c.mu.Unlock()
	if cp == nil {
		return
	}
	r := status.Reading{At: time.Now(), Rows: before + cp.Progress().Rows, Phase: phase, EndBytes: -1, AppliedBytes: -1, Regime: regime,
		Checked: c.checked.Load()}
	st := ap.Stats()
	r.Received, r.Written, r.Applied = st.Changes, st.Rows, p.AppliedChanges()
	if def != nil {
		r.Skipped = def.Stats().Skipped
	}
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if logs, err := binaryLogs(qctx, db); err == nil {
		r.EndBytes = logs.end()
		r.AppliedBytes = logs.abs(ap.Applied())
	}
	cancel()
	if th := c.th.Load(); th != nil {
		ts := th.State()
		r.Throttled = ts.Throttled
		for _, rl := range ts.Replicas {
			if rl.Err == "" && !rl.At.IsZero() {
				if r.Lags == nil {
					r.Lags = map[string]float64{}
				}
				r.Lags[rl.Name] = rl.Lag.Seconds()
			}
		}
	}
	c.meter.Add(r)
}

// regime names what sets the copy's pace now (status.Reading.Regime): the
// pacer holding the copy back and its ratio, the rate cap in force, the
// nice ratio, the threads. The ETA's copy rate is taken over the last
// minute of readings since it last changed. c.mu is held.
func (c *Control) regime() string {
	paced, ratio := false, 0.0
	if c.thr != nil && c.thr.Pacer() != nil {
		pc := c.thr.Pacer()
		paced, ratio = pc.Holding(), pc.State().Ratio
	}
	capped := 0.0
	if c.rateCapped() {
		capped = c.rateCap.Rate()
	}
	return fmt.Sprintf("paced=%t ratio=%g cap=%g nice=%g threads=%d", paced, ratio, capped, c.niceRatio, c.threads)
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

// History returns the one-second samples for the status page.
func (c *Control) History() []status.Sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.meter.History(c.percent)
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
		ThrottleFlagFile: c.flagFile, PanicFlagFile: c.panicFile, PostponeFlagFile: c.postponeFile, ThrottleQuery: c.throttleQuery,
		NiceRatio: c.niceRatio, MaxCopyRate: c.rateCap.Rate(), MinCopyRate: c.minRate,
	}
	if c.thr != nil && c.thr.Pacer() != nil {
		s.Settings.MaxLatencyRatio = c.thr.Pacer().State().Ratio
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
	r := c.meter.Rates()
	c.copyStatus(&s, r)
	if c.checkStarted {
		s.Checksum = &status.Checksum{RowsCompared: c.checked.Load(), RowsTotal: s.Copy.RowsCopied, RowsPerSecond: r.Checked, Done: c.checkDone}
	}
	c.copyLockStatus(&s) // copy_lock.go
	c.throttleStatus(&s)
	backlog, drain := status.Backlog(&s, r, c.ap != nil)
	s.Apply.Backlog = backlog
	s.ETA = status.Estimate(&s, r, backlog, drain, c.cutNote)
	return s
}

// copyStatus fills the copy's and the applier's parts of s.
func (c *Control) copyStatus(s *status.Snapshot, r status.Rates) {
	if c.cp != nil {
		pr := c.cp.Progress()
		rows := c.copiedBefore + pr.Rows
		s.Copy = status.Copy{RowsCopied: rows, RowsEstimated: c.estimate, Percent: c.percent(rows, c.phase),
			RowsPerSecond: r.Copy, Chunks: pr.Chunks, ChunkSize: pr.ChunkSize, InFlight: pr.InFlight, Done: pr.Done}
		if !pr.Done && c.rateCapped() {
			s.Copy.CappedAt = c.rateCap.Rate()
		}
	}
	if c.ap == nil {
		return
	}
	st := c.ap.Stats()
	applied := c.pump.AppliedChanges()
	s.Apply = status.Apply{IncomingPerSecond: r.Incoming, AppliedPerSecond: r.Applied, SkippedPerSecond: r.Skipped,
		EventsReceived: st.Changes, EventsApplied: applied, RowsWritten: st.Rows,
		BacklogEvents: max(st.Changes-applied, 0), BacklogBytes: -1, AppliedPosition: c.ap.Applied().String(),
		BinlogBytesPerSecond: max(r.BinlogIn, 0), BinlogAppliedBytesPerSecond: max(r.BinlogApplied, 0)}
	if last, ok := c.meter.Last(); ok && last.EndBytes >= 0 && last.AppliedBytes >= 0 {
		s.Apply.BacklogBytes = max(last.EndBytes-last.AppliedBytes, 0)
	}
}

// throttleStatus fills the throttle's and the replicas' parts of s.
func (c *Control) throttleStatus(s *status.Snapshot) {
	th := c.th.Load()
	if th == nil {
		if c.paused {
			s.Throttle = status.Throttle{Throttled: true, Reason: "paused by operator", Paused: true}
		}
		return
	}
	ts := th.State()
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
	if c.thr != nil && c.thr.Pacer() != nil {
		ps := c.thr.Pacer().State()
		s.Pace = &status.Pace{Duty: ps.Duty, Ratio: ps.Ratio, BaselineSeconds: ps.Baseline.Seconds(), CurrentSeconds: ps.Current.Seconds(), AppIdle: ps.Idle, AppSeen: ps.Seen,
			ChunkTime: c.copyChunkTime.String(), Measuring: ps.Measuring}
	}
}
