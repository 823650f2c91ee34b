// Package migration runs one schema change: a list of phases (inspect, plan,
// create the ghost, stream, copy, catch up, cut over, clean up) with one
// fatal path. Each phase lives in its own function; this package wires the
// other packages together and holds no SQL protocol of its own.
package migration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/hooks"
	"github.com/recast-osc/recast/internal/settings"
	"github.com/recast-osc/recast/internal/throttle"
)

// Options is a migration's configuration (what the CLI's flags say); what
// it runs with (logger, progress writer, control) is its Runtime.
type Options struct {
	Conn     dbconn.Config
	Database string
	Table    string
	Alter    string
	Execute  bool

	DropOldTable bool
	// TimestampOldTable keeps the old table as _T_<YYYYMMDDhhmmss>_old (the
	// run's start, UTC) instead of _T_old, so that an earlier migration's
	// old table does not stand in the way (gh-ost's --timestamp-old-table).
	TimestampOldTable bool
	// InitiallyDropOldTable drops a table under the old table's name before
	// the copy starts, instead of refusing to start; InitiallyDropGhostTable
	// drops an interrupted run's ghost, checkpoint and swap-renamed ghost
	// (gh-ost's --initially-drop-old-table / --initially-drop-ghost-table).
	// Both drop only under recast's own helper names, under the
	// metadata-lock policy of the cut-over.
	InitiallyDropOldTable, InitiallyDropGhostTable bool
	// Hooks (package hooks): the directory of gh-ost-named executables, the
	// limit on each, how often on-status hooks run, and the hints passed.
	HooksPath                                 string
	HooksTimeout, HooksStatusInterval         time.Duration
	HooksHint, HooksHintOwner, HooksHintToken string
	// Checksum compares old and new table before the cut-over (and repairs).
	Checksum bool
	// Resume continues an interrupted run from its checkpoint table.
	Resume bool
	// CheckpointInterval is how often progress is saved for --resume.
	CheckpointInterval time.Duration
	// ApplyThreads is the number of parallel applier connections.
	ApplyThreads int
	// Threads is the number of copy chunks in flight at once.
	Threads int
	// ChunkTime is the target duration of one copy chunk.
	ChunkTime time.Duration
	// MaxChunkRows caps a copy chunk (rows read by one statement).
	MaxChunkRows int
	// CopyLock is how copy chunks read the source: "none" (the default: a
	// consistent read, no row locks; the pipeline holds the changes to a
	// chunk's range until the chunk is over, docs/copy.md) or "share"
	// (LOCK IN SHARE MODE). "none" falls back to "share" where the server
	// does not make commits visible in binlog order.
	CopyLock string
	// DeferIndexes leaves the new table's plain secondary indexes out of
	// the copy and builds them after it, in one in-place ALTER of the
	// ghost (deferidx.go): a faster copy, but replicas replay that ALTER
	// as one statement and lag by its duration.
	DeferIndexes bool
	// CutOverLockTimeout bounds each cut-over lock attempt.
	CutOverLockTimeout time.Duration
	CutOverAttempts    int
	// CutOverBudget bounds the cut-over (or the INSTANT ALTER), waiting for
	// metadata-lock blockers included.
	CutOverBudget time.Duration
	// Method is "auto" (INSTANT or metadata-only NOCOPY when the server can,
	// else copy), "copy" or "instant" (fail unless the server can).
	Method string
	// KillBlockersAfter, if positive, kills the sessions that have blocked
	// the cut-over's metadata lock for that long (see package mdl).
	KillBlockersAfter time.Duration
	// KillMaxRows: never kill a transaction that modified more rows.
	KillMaxRows int64
	// LoadMDLPlugin installs the metadata_lock_info plugin if needed.
	LoadMDLPlugin bool
	// PostponeCutOverFlagFile: while this file exists, keep the ghost in
	// sync and do not cut over.
	PostponeCutOverFlagFile string
	// ServerID is the replica server id of recast's binlog connection.
	ServerID uint32

	// Throttling (control.go, package throttle): the copy pauses while a
	// status variable exceeds MaxLoad, a replica lags more than MaxLag (0:
	// lag ignored) or ThrottleFlagFile exists; the migration aborts when
	// CriticalLoad persists for CriticalLoadGrace or PanicFlagFile appears.
	MaxLoad, CriticalLoad throttle.Thresholds
	CriticalLoadGrace     time.Duration
	MaxLag                time.Duration
	// Replicas (host:port) whose lag is watched; empty: those SHOW SLAVE
	// HOSTS lists.
	Replicas                        []string
	ThrottleFlagFile, PanicFlagFile string
	// ThrottleQuery (gh-ost's --throttle-query): a query returning one
	// integer, run on the primary every second; the copy pauses while it is
	// above 0 (an error throttles too, with the reason).
	ThrottleQuery string
	// ThrottleHTTP (gh-ost's --throttle-http): a URL requested every
	// second; the copy pauses while the answer is not 200 OK (no answer
	// within ThrottleHTTPTimeout throttles too).
	ThrottleHTTP        string
	ThrottleHTTPTimeout time.Duration
	// MaxLatencyRatio > 0 paces the copy (throttle.Pacer): a probe
	// transaction's latency (p90 over the last second) is kept at most this
	// many times its latency before the copy, by sleeping between chunks.
	MaxLatencyRatio float64
	// NiceRatio (gh-ost's --nice-ratio): after each chunk its copy thread
	// sleeps NiceRatio × the chunk's time (1: the copy takes twice as long);
	// with MaxLatencyRatio too, the longer of the two sleeps.
	NiceRatio float64
	// MaxCopyRate > 0 (--max-copy-rate): the copy's threads together write
	// at most this many rows a second while the application may be active
	// (the pacer's view of it; always, without a pacer), in short chunks
	// (PacedChunkTime). 0: no cap.
	MaxCopyRate float64
	// MinCopyRate > 0 (--min-copy-rate): the pacer (MaxLatencyRatio) never
	// slows the copy's threads together below this many rows a second, so
	// that a copy under a steady load finishes; the other throttles
	// (replica lag, load, flag files, --max-copy-rate, --nice-ratio) still
	// apply. 0: no floor.
	MinCopyRate float64
	// ExactRowcount (gh-ost's --exact-rowcount): count the rows with
	// SELECT COUNT(*) in the background at the start, for the progress and
	// the ETA, instead of the table statistics' estimate.
	ExactRowcount bool

	// ProgressInterval is how often a progress line is written to
	// Runtime.Progress.
	ProgressInterval time.Duration
}

// Runtime is what a migration runs with, beside its configuration: where
// it reports and who steers it. The zero value is usable.
type Runtime struct {
	// Control, if set, shows and steers the run (Control.Run sets it).
	Control  *Control
	Progress io.Writer
	Logger   *slog.Logger
	// Pause, if set, is called at named points; tests use it to inject
	// faults or writes at exact moments ("copy-done", "cutover:locked", ...).
	Pause func(ctx context.Context, point string)
}

// withDefaults fills what is unset.
func (rt Runtime) withDefaults() Runtime {
	if rt.Logger == nil {
		rt.Logger = slog.Default()
	}
	if rt.Progress == nil {
		rt.Progress = io.Discard
	}
	if rt.Pause == nil {
		rt.Pause = func(context.Context, string) {}
	}
	return rt
}

// DefaultOptions returns the defaults the CLI shows (package settings).
func DefaultOptions() Options {
	return Options{
		Checksum:            true,
		CheckpointInterval:  settings.CheckpointInterval.Default,
		ApplyThreads:        settings.ApplyThreads.Default,
		Threads:             settings.Threads.Default,
		ChunkTime:           settings.ChunkTime.Default,
		MaxChunkRows:        settings.MaxChunkRows.Default,
		CutOverLockTimeout:  settings.CutOverLockTimeout.Default,
		CutOverAttempts:     settings.CutOverAttempts.Default,
		CutOverBudget:       settings.CutOverBudget.Default,
		Method:              "auto",
		CopyLock:            "none",
		HooksTimeout:        hooks.DefaultTimeout,
		HooksStatusInterval: hooks.DefaultStatusInterval,
		KillMaxRows:         10000,
		ProgressInterval:    settings.ProgressInterval.Default,
		CriticalLoadGrace:   settings.CriticalLoadGrace.Default,
		MaxLag:              settings.MaxLag.Default,
		ThrottleHTTPTimeout: settings.ThrottleHTTPTimeout.Default,
		MaxLatencyRatio:     settings.DefaultLatencyRatio,
		MinCopyRate:         settings.DefaultMinCopyRate,
	}
}

// Validate checks the options that do not need a server.
func (o *Options) Validate() error {
	var errs []error
	if o.Database == "" {
		errs = append(errs, errors.New("--database is required"))
	}
	if o.Table == "" {
		errs = append(errs, errors.New("--table is required"))
	}
	if o.Alter == "" {
		errs = append(errs, errors.New("--alter is required"))
	}
	errs = append(errs, settings.Threads.Check(o.Threads), settings.ApplyThreads.Check(o.ApplyThreads),
		settings.MaxChunkRows.Check(o.MaxChunkRows), settings.ChunkTime.Check(o.ChunkTime), settings.MaxLag.Check(o.MaxLag))
	if o.ThrottleHTTP != "" {
		if err := settings.ThrottleHTTPTimeout.Check(o.ThrottleHTTPTimeout); err != nil {
			errs = append(errs, err)
		}
		if u, err := url.Parse(o.ThrottleHTTP); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--throttle-http must be an http:// or https:// URL, not %q", o.ThrottleHTTP))
		}
	}
	errs = append(errs, settings.LatencyRatio(o.MaxLatencyRatio), settings.NiceRatio(o.NiceRatio), settings.CopyRate(o.MaxCopyRate), settings.MinCopyRate(o.MinCopyRate))
	switch o.CopyLock {
	case "":
		o.CopyLock = "none"
	case "none", "share":
	default:
		errs = append(errs, fmt.Errorf("--copy-lock must be none or share, not %q", o.CopyLock))
	}
	switch o.Method {
	case "":
		o.Method = "auto"
	case "auto", "copy", "instant":
	default:
		errs = append(errs, fmt.Errorf("--method must be auto, copy or instant, not %q", o.Method))
	}
	for _, r := range o.Replicas {
		if _, _, err := throttle.ParseAddr(r); err != nil {
			errs = append(errs, err)
		}
	}
	if o.TimestampOldTable && len(OldTableName(o.Table, true, time.Time{})) > 64 {
		errs = append(errs, fmt.Errorf("--timestamp-old-table: table name %q is longer than 44 characters: the old table's name _%s_<YYYYMMDDhhmmss>_old would not fit in 64", o.Table, o.Table))
	}
	if o.InitiallyDropGhostTable && o.Resume {
		errs = append(errs, errors.New("--initially-drop-ghost-table drops what --resume continues from: pass one or the other"))
	}
	if o.HooksTimeout < 0 || o.HooksStatusInterval < 0 {
		errs = append(errs, errors.New("--hooks-timeout and --hooks-status-interval must not be negative"))
	}
	if len(o.Table) > 55 {
		errs = append(errs, fmt.Errorf("table name %q is longer than 55 characters: recast's helper table names would not fit in 64", o.Table))
	}
	if o.ServerID == 0 {
		o.ServerID = 0x7ec0000 + uint32(time.Now().UnixNano()%0xffff)
	}
	return errors.Join(errs...)
}

// Helper table names for table t.
func GhostName(t string) string { return "_" + t + "_new" }

// OldName is where the original table is kept after the cut-over.
func OldName(t string) string { return "_" + t + "_old" }

// oldTimeFormat is the timestamp of --timestamp-old-table (gh-ost's).
const oldTimeFormat = "20060102150405"

// OldTableName is where the original table is kept after a cut-over of a run
// started at start: OldName, or with timestamp _T_<YYYYMMDDhhmmss>_old (UTC).
func OldTableName(t string, timestamp bool, start time.Time) string {
	if !timestamp {
		return OldName(t)
	}
	return "_" + t + "_" + start.UTC().Format(oldTimeFormat) + "_old"
}
