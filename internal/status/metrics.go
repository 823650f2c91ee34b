package status

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Registry returns a Prometheus registry with the migration's metrics
// (recast_ prefix, read from c.Status() at each scrape) and the Go runtime's
// and process's.
func Registry(c Controller) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collector{c}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

type collector struct{ c Controller }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("recast_"+name, help, labels, nil)
}

var (
	dInfo          = desc("info", "The migration: table and ALTER.", "table", "alter")
	dPhase         = desc("phase", "1 for the current phase, 0 for the others.", "phase")
	dElapsed       = desc("elapsed_seconds", "Time since the migration started.")
	dCopied        = desc("rows_copied_total", "Rows copied into the new table by the chunked copy.")
	dEstimated     = desc("rows_estimated", "The table's row estimate.")
	dProgress      = desc("copy_progress_ratio", "Rows copied / rows estimated (1 when the copy is done).")
	dCopyRate      = desc("copy_rows_per_second", "Copy rate.")
	dChunkSize     = desc("copy_chunk_rows", "Current chunk size in rows.")
	dRateCap       = desc("copy_rate_cap_rows_per_second", "The copy's rate cap in force now (--max-copy-rate; 0: none, or the application idle).")
	dChecked       = desc("checksum_rows_compared_total", "Rows the checksum's first round has compared (absent before it starts).")
	dCheckRate     = desc("checksum_rows_per_second", "The checksum's rate over the last minute (absent before it starts).")
	dInFlight      = desc("copy_chunks_in_flight", "Chunks being copied now.")
	dReceived      = desc("binlog_events_received_total", "Row changes of the table read from the binlog.")
	dApplied       = desc("binlog_events_applied_total", "Row changes applied to the new table.")
	dWritten       = desc("apply_rows_written_total", "Rows written by the applier (after coalescing).")
	dInRate        = desc("incoming_events_per_second", "Row changes of the table arriving from the binlog per second.")
	dApplyRate     = desc("applied_events_per_second", "Row changes applied per second.")
	dBacklogEvents = desc("backlog_events", "Row changes read but not applied yet.")
	dBacklogBytes  = desc("backlog_bytes", "Binlog bytes not applied yet (read or not).")
	dDraining      = desc("backlog_draining", "1 when the backlog is caught up or draining, 0 when it is not draining.")
	dLag           = desc("replica_lag_seconds", "Replica lag from the heartbeat (absent when unreadable).", "replica")
	dLagReadable   = desc("replica_lag_readable", "1 when the replica's lag can be read.", "replica")
	dThrottled     = desc("throttled", "1 while the copy is throttled.")
	dThrottledSecs = desc("throttled_seconds_total", "Time spent throttled.")
	dPaused        = desc("paused", "1 while paused by the operator.")
	dDuty          = desc("copy_duty", "Share of a copy thread's time spent in chunks (--max-latency-ratio paces it; 1 when not paced).")
	dProbe         = desc("probe_latency_seconds", "The pacing probe's latency (p90 over the last second; --max-latency-ratio).")
	dProbeBase     = desc("probe_baseline_seconds", "The pacing probe's latency before the copy (p90; --max-latency-ratio).")
	dDelay         = desc("applier_delay_seconds", "Wait between applier windows (replicas cannot keep up).")
	dETA           = desc("eta_seconds", "Estimated time left (absent when there is no honest estimate).")
	dThreads       = desc("copy_threads", "Copy threads setting.")
	dChunkTime     = desc("chunk_time_seconds", "Target chunk duration setting.")
	dMaxChunkRows  = desc("max_chunk_rows", "Chunk size cap setting.")
	dMaxLag        = desc("max_lag_seconds", "Replica lag limit setting (0: lag ignored).")
	dBlockers      = desc("mdl_blockers", "Sessions blocking the cut-over's metadata lock.")
	dCopyLock      = desc("copy_lock_mode", "1 for the copy's lock mode (lock-free or share), with the reason.", "mode", "reason")
	dDeferHeld     = desc("deferral_held_events", "Binlog events held until the chunk copying their range is written (lock-free copy).")
	dDeferMaxHeld  = desc("deferral_max_held_events", "Most binlog events held at once (lock-free copy).")
	dDeferOpen     = desc("deferral_ranges_open", "Chunk ranges registered and not closed (lock-free copy).")
	dDeferTotal    = desc("deferral_held_events_total", "Binlog events held so far (lock-free copy).")
	dDeferSkipped  = desc("deferral_skipped_changes_total", "Row changes left to the copy: no chunk had read their row yet (lock-free copy).")
)

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dInfo, dPhase, dElapsed, dCopied, dEstimated, dProgress, dCopyRate, dChunkSize, dRateCap, dInFlight, dChecked, dCheckRate,
		dReceived, dApplied, dWritten, dInRate, dApplyRate, dBacklogEvents, dBacklogBytes, dDraining, dLag, dLagReadable,
		dThrottled, dThrottledSecs, dPaused, dDuty, dProbe, dProbeBase, dDelay, dETA, dThreads, dChunkTime, dMaxChunkRows, dMaxLag, dBlockers,
		dCopyLock, dDeferHeld, dDeferMaxHeld, dDeferOpen, dDeferTotal, dDeferSkipped} {
		ch <- d
	}
}

func (k collector) Collect(ch chan<- prometheus.Metric) {
	s := k.c.Status()
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	cnt := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	g(dInfo, 1, s.Table, s.Alter)
	for _, p := range Phases {
		g(dPhase, b2f(p == s.Phase), p)
	}
	g(dElapsed, s.ElapsedSeconds)
	cnt(dCopied, float64(s.Copy.RowsCopied))
	g(dEstimated, float64(s.Copy.RowsEstimated))
	g(dProgress, s.Copy.Percent/100)
	g(dCopyRate, s.Copy.RowsPerSecond)
	g(dChunkSize, float64(s.Copy.ChunkSize))
	g(dRateCap, s.Copy.CappedAt)
	g(dInFlight, float64(s.Copy.InFlight))
	if k := s.Checksum; k != nil {
		cnt(dChecked, float64(k.RowsCompared))
		g(dCheckRate, k.RowsPerSecond)
	}
	cnt(dReceived, float64(s.Apply.EventsReceived))
	cnt(dApplied, float64(s.Apply.EventsApplied))
	cnt(dWritten, float64(s.Apply.RowsWritten))
	g(dInRate, s.Apply.IncomingPerSecond)
	g(dApplyRate, s.Apply.AppliedPerSecond)
	g(dBacklogEvents, float64(s.Apply.BacklogEvents))
	if s.Apply.BacklogBytes >= 0 {
		g(dBacklogBytes, float64(s.Apply.BacklogBytes))
	}
	g(dDraining, b2f(s.Apply.Backlog != "not draining"))
	for _, r := range s.Replicas {
		g(dLagReadable, b2f(r.LagSeconds != nil), r.Name)
		if r.LagSeconds != nil {
			g(dLag, *r.LagSeconds, r.Name)
		}
	}
	g(dThrottled, b2f(s.Throttle.Throttled))
	cnt(dThrottledSecs, s.Throttle.ThrottledSeconds)
	g(dPaused, b2f(s.Throttle.Paused))
	if s.Pace != nil {
		g(dDuty, s.Pace.Duty)
		g(dProbe, s.Pace.CurrentSeconds)
		g(dProbeBase, s.Pace.BaselineSeconds)
	} else {
		g(dDuty, 1)
	}
	g(dDelay, s.Apply.ApplierDelaySeconds)
	if s.ETA.Seconds != nil {
		g(dETA, *s.ETA.Seconds)
	}
	g(dThreads, float64(s.Settings.Threads))
	g(dChunkTime, durSeconds(s.Settings.ChunkTime))
	g(dMaxChunkRows, float64(s.Settings.MaxChunkRows))
	g(dMaxLag, durSeconds(s.Settings.MaxLag))
	g(dBlockers, float64(len(s.MDLBlockers)))
	if s.Copy.Lock != "" {
		g(dCopyLock, 1, s.Copy.Lock, s.Copy.LockReason)
	}
	if d := s.Copy.Deferral; d != nil {
		g(dDeferHeld, float64(d.HeldNow))
		g(dDeferMaxHeld, float64(d.MaxHeld))
		g(dDeferOpen, float64(d.RangesOpen))
		cnt(dDeferTotal, float64(d.Held))
		cnt(dDeferSkipped, float64(d.Skipped))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func durSeconds(s string) float64 {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0
	}
	return d.Seconds()
}
