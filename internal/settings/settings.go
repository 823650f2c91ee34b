// Package settings defines recast migrate's tunable settings once: name,
// default, unit, range, and whether a running migration accepts a change
// (recast ctl set, POST /set, the socket's set commands). The CLI takes its
// defaults from here (migration.DefaultOptions), Options.Validate checks
// ranges with the same definitions, and the live control parses and checks
// a new value with them too, so a value is valid at start-up exactly when it
// is valid at run time.
package settings

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Int is an integer setting.
type Int struct {
	Name     string // the flag and the live key, without dashes
	Default  int
	Min, Max int
	Unit     string
	Live     bool // changeable while the migration runs
}

// Check reports whether v is in range.
func (d Int) Check(v int) error {
	if v < d.Min || v > d.Max {
		return fmt.Errorf("--%s must be %d..%d %s, not %d", d.Name, d.Min, d.Max, d.Unit, v)
	}
	return nil
}

// Parse parses and checks a live value.
func (d Int) Parse(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%s=%s: want a number from %d to %d", d.Name, s, d.Min, d.Max)
	}
	if err := d.Check(n); err != nil {
		return 0, fmt.Errorf("%s=%s: want a number from %d to %d", d.Name, s, d.Min, d.Max)
	}
	return n, nil
}

// Duration is a duration setting. Max 0: no upper bound.
type Duration struct {
	Name     string
	Default  time.Duration
	Min, Max time.Duration
	Live     bool
}

// Check reports whether v is in range.
func (d Duration) Check(v time.Duration) error {
	if v < d.Min || (d.Max > 0 && v > d.Max) {
		return fmt.Errorf("--%s must be %s, not %s", d.Name, d.rangeText(), v)
	}
	return nil
}

func (d Duration) rangeText() string {
	if d.Max > 0 {
		return fmt.Sprintf("%s to %s", short(d.Min), short(d.Max))
	}
	if d.Min == 0 {
		return "0 or more"
	}
	return "at least " + short(d.Min)
}

// Parse parses and checks a live value.
func (d Duration) Parse(s string) (time.Duration, error) {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%s=%s: want a duration like 500ms or 2s", d.Name, s)
	}
	if err := d.Check(v); err != nil {
		return 0, fmt.Errorf("%s=%s: want %s", d.Name, s, d.rangeText())
	}
	return v, nil
}

// short renders 1m0s as 1m and 1s as 1s.
func short(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	if s == "" {
		return "0"
	}
	return s
}

// The settings. Those with Live set are the keys of recast ctl set (plus
// max-load and critical-load, thresholds parsed by package throttle).
var (
	Threads            = Int{Name: "threads", Default: 2, Min: 1, Max: 64, Unit: "chunks in flight", Live: true}
	ApplyThreads       = Int{Name: "apply-threads", Default: 4, Min: 1, Max: 64, Unit: "connections"}
	MaxChunkRows       = Int{Name: "max-chunk-rows", Default: 5000, Min: 1, Max: 10_000_000, Unit: "rows", Live: true}
	CutOverAttempts    = Int{Name: "cut-over-retries", Default: 10, Min: 1, Max: 1000, Unit: "attempts"}
	ChunkTime          = Duration{Name: "chunk-time", Default: 200 * time.Millisecond, Min: time.Millisecond, Max: time.Minute, Live: true}
	MaxLag             = Duration{Name: "max-lag", Default: time.Second, Live: true}
	CheckpointInterval = Duration{Name: "checkpoint-interval", Default: 5 * time.Second, Min: 100 * time.Millisecond}
	CutOverLockTimeout = Duration{Name: "cut-over-lock-timeout", Default: 3 * time.Second, Min: time.Millisecond}
	CutOverBudget      = Duration{Name: "cut-over-budget", Default: 10 * time.Minute, Min: time.Second}
	CriticalLoadGrace  = Duration{Name: "critical-load-grace", Default: 5 * time.Second}
	ProgressInterval   = Duration{Name: "progress-interval", Default: 5 * time.Second}
	// ThrottleHTTPTimeout bounds one --throttle-http request.
	ThrottleHTTPTimeout = Duration{Name: "throttle-http-timeout", Default: time.Second, Min: time.Millisecond, Max: time.Minute}
)

// Aliases are other names the live control accepts for a key.
var Aliases = map[string]string{"chunk-size": "max-chunk-rows"}

// LiveKeys are the keys a running migration accepts, in display order.
var LiveKeys = []string{Threads.Name, ChunkTime.Name, MaxChunkRows.Name, MaxLag.Name, "max-load", "critical-load", "throttle-query", "max-latency-ratio", "nice-ratio", "max-copy-rate", "min-copy-rate"}

// NiceRatio checks a --nice-ratio value (gh-ost's range): 0 to 100.
func NiceRatio(r float64) error {
	if !(r >= 0 && r <= 100) {
		return fmt.Errorf("--nice-ratio must be between 0 and 100, not %g", r)
	}
	return nil
}

// CopyRate checks a --max-copy-rate value: 0 (no cap) or 10 rows a second
// and more (below that one chunk of the smallest size, 100 rows, would be
// followed by a sleep of over 10 s).
func CopyRate(r float64) error {
	if r != 0 && !(r >= 10 && r <= 1e9) {
		return fmt.Errorf("--max-copy-rate must be 0 (no cap) or between 10 and 1e9 rows a second, not %g", r)
	}
	return nil
}

// MinCopyRate checks a --min-copy-rate value: 0 (no floor) up to 1e9 rows a
// second.
func MinCopyRate(r float64) error {
	if !(r >= 0 && r <= 1e9) {
		return fmt.Errorf("--min-copy-rate must be between 0 (no floor) and 1e9 rows a second, not %g", r)
	}
	return nil
}

// DefaultMinCopyRate is --min-copy-rate's default: under a steady load the
// pacer held the copy near its duty floor (0.4 %), 40-70 rows a second on
// a 2-vCPU MySQL at 40 % load, where a 1M-row copy would take hours;
// sysbench's p99 did not follow the copy's rate up to ~3,000 rows a second
// on the bench (docs/benchmarks.md, sessions 25 and 27).
const DefaultMinCopyRate = 1000

// DefaultLatencyRatio is --max-latency-ratio's default: the copy is paced
// so that a small write's latency stays within 1.5 times what it was
// before the copy, whenever the application is active (throttle.Pacer).
// It was 2 until session 17. The baseline is taken with recast already
// there (its binlog stream, its applier, its heartbeat), which costs the
// application ×1.0-1.7 on the bench before a row is copied, and on the
// bench the application's p99 rose more than the probe's: MariaDB 11.8 at
// light load, the probe ×1.8 and sysbench's p99 ×2.8-2.9 at 2 (and with
// session 16's pacer), ×1.4 and ×2.0 at 1.5 (docs/benchmarks.md,
// *Session 17*).
const DefaultLatencyRatio = 1.5

// LatencyRatio checks a --max-latency-ratio value: 0 (off) or 1.2 to 100.
func LatencyRatio(r float64) error {
	if r != 0 && (r < 1.2 || r > 100) {
		return fmt.Errorf("--max-latency-ratio must be 0 (off) or between 1.2 and 100, not %g", r)
	}
	return nil
}

// Key normalises a live key: lower case, aliases resolved.
func Key(k string) string {
	k = strings.ToLower(strings.TrimSpace(k))
	if a, ok := Aliases[k]; ok {
		return a
	}
	return k
}
