// Package status shows a running migration and lets an operator steer it:
// an HTTP endpoint (JSON status, Prometheus metrics, a self-contained HTML
// page with live charts, POST endpoints to pause, resume, change settings,
// cut over and abort), a unix socket that speaks gh-ost's interactive
// commands, and the client `recast ctl` uses. It knows the migration only
// through the Controller interface (package migration's Control implements
// it).
package status

import (
	"fmt"
	"strings"
	"time"
)

// Phases of a migration, in order ("failed" ends any of them).
const (
	PhaseInspect  = "inspect"
	PhaseCopy     = "copy"
	PhaseCatchUp  = "catch-up"
	PhaseChecksum = "checksum"
	PhaseCutOver  = "cutover"
	PhaseDone     = "done"
	PhaseFailed   = "failed"
)

// Phases lists the phases in order.
var Phases = []string{PhaseInspect, PhaseCopy, PhaseCatchUp, PhaseChecksum, PhaseCutOver, PhaseDone, PhaseFailed}

// Controller is what the endpoints show and steer.
type Controller interface {
	Status() Snapshot
	History() []Sample
	Pause() error
	Resume() error
	// Set changes a setting at run time: threads, chunk-time,
	// max-chunk-rows, max-lag, max-load, critical-load.
	Set(key, value string) error
	// Unpostpone lets a postponed cut-over go ahead now.
	Unpostpone() error
	// Abort stops the migration cleanly (before the cut-over the original
	// table is untouched and the helper tables are dropped).
	Abort(reason string) error
}

// SettableKeys are the keys Set accepts.
var SettableKeys = []string{"threads", "chunk-time", "max-chunk-rows", "max-lag", "max-load", "critical-load", "throttle-query", "max-latency-ratio", "nice-ratio", "max-copy-rate", "min-copy-rate"}

// Snapshot is GET /status.
type Snapshot struct {
	Table          string     `json:"table"` // `schema`.`table`
	Alter          string     `json:"alter"`
	Phase          string     `json:"phase"`
	Error          string     `json:"error,omitempty"`
	StartedAt      time.Time  `json:"started_at"`
	ElapsedSeconds float64    `json:"elapsed_seconds"`
	Copy           Copy       `json:"copy"`
	Checksum       *Checksum  `json:"checksum,omitempty"` // from the checksum's start
	Apply          Apply      `json:"apply"`
	Replicas       []Replica  `json:"replicas"`
	Throttle       Throttle   `json:"throttle"`
	Pace           *Pace      `json:"pace,omitempty"` // --max-latency-ratio
	Settings       Settings   `json:"settings"`
	ETA            ETA        `json:"eta"`
	Postponed      bool       `json:"cutover_postponed"`
	MDLBlockers    []Blocker  `json:"mdl_blockers"`
	UpdatedAt      time.Time  `json:"updated_at"`
	Done           *time.Time `json:"finished_at,omitempty"`
}

// Copy is the row copy.
type Copy struct {
	RowsCopied    int64   `json:"rows_copied"`
	RowsEstimated int64   `json:"rows_estimated"` // the table's row estimate (InnoDB statistics)
	Percent       float64 `json:"percent"`
	RowsPerSecond float64 `json:"rows_per_second"`
	Chunks        int64   `json:"chunks"`
	ChunkSize     int64   `json:"chunk_size"` // rows, adjusted to chunk_time
	InFlight      int64   `json:"chunks_in_flight"`
	Done          bool    `json:"done"`
	// CappedAt: --max-copy-rate holds the copy now, at this many rows a
	// second (0: it does not: no cap, or the application idle).
	CappedAt float64 `json:"capped_rows_per_second,omitempty"`
	// Lock is how chunks read the source: "lock-free" or "share" (LOCK IN
	// SHARE MODE); LockReason why (a fallback names its cause).
	Lock       string    `json:"lock,omitempty"`
	LockReason string    `json:"lock_reason,omitempty"`
	Deferral   *Deferral `json:"deferral,omitempty"` // lock-free copy only
}

// Deferral is the lock-free copy's holding of changes to ranges being
// copied (pipeline.Deferrer).
type Deferral struct {
	HeldNow    int   `json:"held_events"`     // events held now
	MaxHeld    int   `json:"max_held_events"` // most held at once
	RangesOpen int   `json:"ranges_open"`     // chunk ranges registered and not closed
	Held       int64 `json:"held_total"`      // events held so far
	Released   int64 `json:"released_total"`  // held events handed to the applier
	Ranges     int64 `json:"ranges_total"`    // ranges whose watermark the stream read while open
	Skipped    int64 `json:"skipped_total"`   // row changes left to the copy: no chunk had read their row yet
}

// Apply is the binlog applier against the incoming changes.
type Apply struct {
	// IncomingPerSecond counts the row changes of the table handed to the
	// applier: those read from the binlog, less the ones left to the copy
	// (SkippedPerSecond; docs/copy.md).
	IncomingPerSecond float64 `json:"incoming_events_per_second"`
	SkippedPerSecond  float64 `json:"left_to_copy_events_per_second"` // row changes to rows no chunk had read yet, dropped
	AppliedPerSecond  float64 `json:"applied_events_per_second"`      // row changes applied to the ghost
	EventsReceived    int64   `json:"events_received"`
	EventsApplied     int64   `json:"events_applied"`
	RowsWritten       int64   `json:"rows_written"` // after coalescing
	BacklogEvents     int64   `json:"backlog_events"`
	// BacklogBytes is the binlog not yet applied (read or not), -1 unknown.
	BacklogBytes                int64   `json:"backlog_bytes"`
	BinlogBytesPerSecond        float64 `json:"binlog_bytes_per_second"`
	BinlogAppliedBytesPerSecond float64 `json:"binlog_applied_bytes_per_second"`
	// Backlog is "caught up", "draining" or "not draining".
	Backlog             string  `json:"backlog"`
	ApplierDelaySeconds float64 `json:"applier_delay_seconds"`
	// AppliedPosition is the binlog position applied to the ghost table
	// (file:offset), gh-ost's "coordinates".
	AppliedPosition string `json:"applied_position,omitempty"`
}

// Replica is one replica's lag.
type Replica struct {
	Name       string   `json:"name"`
	LagSeconds *float64 `json:"lag_seconds"` // null: unreadable
	Error      string   `json:"error,omitempty"`
	Lagging    bool     `json:"lagging"`
}

// Checksum is the checksum's first round (package checksum): the rows it
// has compared, of about RowsTotal (the rows copied), at RowsPerSecond
// over the last minute (it is paced like the copy while the application
// is active).
type Checksum struct {
	RowsCompared  int64   `json:"rows_compared"`
	RowsTotal     int64   `json:"rows_total"`
	RowsPerSecond float64 `json:"rows_per_second"`
	Done          bool    `json:"done"` // the first round is over (repairs may follow)
}

// Throttle is the throttle's state.
type Throttle struct {
	Throttled        bool       `json:"throttled"`
	Reason           string     `json:"reason,omitempty"`
	Since            *time.Time `json:"since,omitempty"`
	ThrottledSeconds float64    `json:"throttled_seconds"` // total so far
	Paused           bool       `json:"paused"`            // by the operator
	CriticalSince    *time.Time `json:"critical_load_since,omitempty"`
}

// Pace is the copy's pacing (--max-latency-ratio, throttle.Pacer).
type Pace struct {
	Duty            float64 `json:"duty"` // share of a copy thread's time spent in chunks
	Ratio           float64 `json:"max_latency_ratio"`
	BaselineSeconds float64 `json:"probe_baseline_seconds"` // probe p90 before the copy
	CurrentSeconds  float64 `json:"probe_current_seconds"`  // probe p90 at the last decision
	// AppIdle: no application activity seen for a while; the copy runs
	// unpaced (Duty 1) until there is.
	AppIdle bool `json:"application_idle"`
	// AppSeen: the application was seen active within the last 2 s (the
	// binlog's rows of its tables, or its sessions). AppIdle and AppSeen
	// both false: the pacer cannot tell yet, and paces the copy.
	AppSeen bool `json:"application_seen"`
	// ChunkTime: the chunk time the copy aims at now (a paced copy with
	// the application active runs short chunks).
	ChunkTime string `json:"chunk_time"`
	// Measuring: the copy is held for about a second while the probe's
	// baseline is measured again (the application back after being idle,
	// and every minute while it is active).
	Measuring bool `json:"measuring_baseline"`
}

// Settings are the values Set changes.
type Settings struct {
	Threads           int     `json:"threads"`
	ChunkTime         string  `json:"chunk_time"`
	MaxChunkRows      int     `json:"max_chunk_rows"`
	MaxLag            string  `json:"max_lag"`
	MaxLatencyRatio   float64 `json:"max_latency_ratio"`
	NiceRatio         float64 `json:"nice_ratio"`
	MaxCopyRate       float64 `json:"max_copy_rate"` // rows a second while the application may be active; 0: no cap
	MinCopyRate       float64 `json:"min_copy_rate"` // rows a second the pacer never slows the copy below; 0: no floor
	MaxLoad           string  `json:"max_load"`
	CriticalLoad      string  `json:"critical_load"`
	CriticalLoadGrace string  `json:"critical_load_grace"`
	ThrottleFlagFile  string  `json:"throttle_flag_file,omitempty"`
	PanicFlagFile     string  `json:"panic_flag_file,omitempty"`
	PostponeFlagFile  string  `json:"postpone_flag_file,omitempty"`
	ThrottleQuery     string  `json:"throttle_query,omitempty"`
}

// ETA is the estimated time left.
type ETA struct {
	Seconds *float64 `json:"seconds"` // null: no honest estimate (see text)
	Text    string   `json:"text"`
}

// Blocker is a session holding the metadata lock the cut-over needs.
type Blocker struct {
	ID        int64   `json:"id"`
	User      string  `json:"user"`
	Host      string  `json:"host"`
	Command   string  `json:"command"`
	State     string  `json:"state,omitempty"`
	Statement string  `json:"statement,omitempty"`
	Seconds   float64 `json:"seconds"`
	InTrx     bool    `json:"in_transaction"`
}

// Sample is one point of GET /history (one a second).
type Sample struct {
	Time          float64            `json:"t"` // unix seconds
	Phase         string             `json:"phase"`
	Percent       float64            `json:"percent"`
	CopyRate      float64            `json:"copy_rate"`
	IncomingRate  float64            `json:"incoming_rate"`
	AppliedRate   float64            `json:"applied_rate"`
	BacklogEvents int64              `json:"backlog_events"`
	Lags          map[string]float64 `json:"lags,omitempty"` // readable replicas only
	Throttled     bool               `json:"throttled"`
}

// Text renders a snapshot for people (recast ctl status, the socket's
// "status" command).
func (s Snapshot) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table:     %s\n", s.Table)
	if s.Alter != "" {
		fmt.Fprintf(&b, "alter:     %s\n", s.Alter)
	}
	fmt.Fprintf(&b, "phase:     %s (%s elapsed)\n", s.Phase, (time.Duration(s.ElapsedSeconds) * time.Second).String())
	if s.Error != "" {
		fmt.Fprintf(&b, "error:     %s\n", s.Error)
	}
	c := s.Copy
	fmt.Fprintf(&b, "copy:      %.1f%% (%d/~%d rows), %.0f rows/s, chunk %d rows, %d chunk(s) in flight\n",
		c.Percent, c.RowsCopied, c.RowsEstimated, c.RowsPerSecond, c.ChunkSize, c.InFlight)
	if c.Lock != "" {
		fmt.Fprintf(&b, "copy lock: %s (%s)", c.Lock, c.LockReason)
		if d := c.Deferral; d != nil {
			fmt.Fprintf(&b, "; %d event(s) held (max %d), %d range(s) open, %d change(s) left to the copy", d.HeldNow, d.MaxHeld, d.RangesOpen, d.Skipped)
		}
		b.WriteString("\n")
	}
	if k := s.Checksum; k != nil {
		state := fmt.Sprintf("%.0f rows/s", k.RowsPerSecond)
		if k.Done {
			state = "every row compared"
		}
		fmt.Fprintf(&b, "checksum:  %d/~%d rows, %s\n", k.RowsCompared, k.RowsTotal, state)
	}
	a := s.Apply
	fmt.Fprintf(&b, "apply:     %.0f events/s vs incoming %.0f events/s; backlog %d events, %s (%s)",
		a.AppliedPerSecond, a.IncomingPerSecond, a.BacklogEvents, Bytes(a.BacklogBytes), a.Backlog)
	if a.SkippedPerSecond >= 0.5 {
		fmt.Fprintf(&b, "; %.0f events/s left to the copy", a.SkippedPerSecond)
	}
	b.WriteString("\n")
	for _, r := range s.Replicas {
		if r.LagSeconds == nil {
			fmt.Fprintf(&b, "replica:   %s lag unreadable: %s\n", r.Name, r.Error)
		} else {
			fmt.Fprintf(&b, "replica:   %s lag %s\n", r.Name, Seconds(*r.LagSeconds))
		}
	}
	t := s.Throttle
	switch {
	case t.Throttled:
		fmt.Fprintf(&b, "throttle:  throttled: %s\n", t.Reason)
	default:
		fmt.Fprintf(&b, "throttle:  not throttled (%s throttled in total)\n", Seconds(t.ThrottledSeconds))
	}
	st := s.Settings
	fmt.Fprintf(&b, "settings:  threads=%d chunk-time=%s max-chunk-rows=%d max-lag=%s max-load=%s critical-load=%s\n",
		st.Threads, st.ChunkTime, st.MaxChunkRows, st.MaxLag, orNone(st.MaxLoad), orNone(st.CriticalLoad))
	if s.Postponed {
		fmt.Fprintf(&b, "cut-over:  postponed while %s exists (recast ctl cutover / unpostpone)\n", st.PostponeFlagFile)
	}
	for _, bl := range s.MDLBlockers {
		fmt.Fprintf(&b, "blocker:   id %d %s@%s %s %.0fs %s\n", bl.ID, bl.User, bl.Host, bl.Command, bl.Seconds, bl.Statement)
	}
	fmt.Fprintf(&b, "eta:       %s\n", s.ETA.Text)
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Seconds renders seconds as a rounded duration.
func Seconds(f float64) string {
	d := time.Duration(f * float64(time.Second))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// Bytes renders a byte count (-1: unknown).
func Bytes(n int64) string {
	switch {
	case n < 0:
		return "? bytes"
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
