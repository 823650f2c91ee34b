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
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/throttle"
)

// Options is everything a migration needs. The CLI fills it from flags.
type Options struct {
	Conn     dbconn.Config
	Database string
	Table    string
	Alter    string
	Execute  bool
	// ExperimentalMySQL lets recast migrate on MySQL, where known
	// differences remain (ErrMySQLUnsupported).
	ExperimentalMySQL bool

	DropOldTable bool
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
	// MaxChunkRows caps a copy chunk (rows locked by one statement).
	MaxChunkRows int
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
	// Control, if set, shows and steers the run (Control.Run sets it).
	Control *Control

	// ProgressInterval is how often a progress line is written to Progress.
	ProgressInterval time.Duration
	Progress         io.Writer
	Logger           *slog.Logger

	// Pause, if set, is called at named points; tests use it to inject
	// faults or writes at exact moments ("copy-done", "cutover:locked", ...).
	Pause func(ctx context.Context, point string)
}

// DefaultOptions returns the defaults the CLI shows.
func DefaultOptions() Options {
	return Options{
		Checksum:           true,
		CheckpointInterval: 5 * time.Second,
		ApplyThreads:       4,
		Threads:            2,
		ChunkTime:          200 * time.Millisecond,
		MaxChunkRows:       5000,
		CutOverLockTimeout: 3 * time.Second,
		CutOverAttempts:    10,
		CutOverBudget:      10 * time.Minute,
		Method:             "auto",
		KillMaxRows:        10000,
		ProgressInterval:   5 * time.Second,
		Progress:           io.Discard,
		CriticalLoadGrace:  5 * time.Second,
		// MaxLag stays 0 here (lag not watched): the CLI's --max-lag
		// default is 1s; tests that share one sandbox replica must not
		// wait for each other's lag.
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
	if o.Threads < 1 || o.Threads > 64 {
		errs = append(errs, fmt.Errorf("--threads must be 1..64, not %d", o.Threads))
	}
	if o.ApplyThreads < 1 || o.ApplyThreads > 64 {
		errs = append(errs, fmt.Errorf("--apply-threads must be 1..64, not %d", o.ApplyThreads))
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
	if o.MaxLag < 0 {
		errs = append(errs, fmt.Errorf("--max-lag must not be negative, not %s", o.MaxLag))
	}
	if len(o.Table) > 55 {
		errs = append(errs, fmt.Errorf("table name %q is longer than 55 characters: recast's helper table names would not fit in 64", o.Table))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Pause == nil {
		o.Pause = func(context.Context, string) {}
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
