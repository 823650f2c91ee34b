package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/recast-osc/recast/internal/migration"
)

// gh-ost's flag names that recast accepts (docs/gh-ost.md lists all of
// gh-ost's flags). Those that only differ in name are pflag aliases
// (ghostAliases, applied by the flag set's normalize function); those that
// differ in unit are hidden flags converted by ghostFlags.apply.

// ghostAliases maps a gh-ost flag name onto the recast flag of exactly the
// same meaning.
var ghostAliases = map[string]string{
	"ok-to-drop-table":          "drop-old-table", // drop the old table after the cut-over
	"replica-server-id":         "server-id",      // the binlog connection's server id
	"throttle-control-replicas": "replica",        // replicas whose lag throttles (HOST:PORT, comma-separated)
	"debug":                     "verbose",        // debug logging
}

// ghostHints answer a gh-ost flag recast does not accept: what to use
// instead.
var ghostHints = map[string]string{
	"chunk-size":                    "a gh-ost flag; recast sizes chunks by --chunk-time up to --max-chunk-rows (set --max-chunk-rows N to cap chunks at N rows)",
	"critical-load-interval-millis": "a gh-ost flag; recast aborts when --critical-load lasts for --critical-load-grace (a duration, e.g. 5s; 0: at once)",
	"allow-on-master":               "a gh-ost flag; recast always reads the binlog of the server it migrates on (the primary)",
	"assume-rbr":                    "a gh-ost flag; recast checks binlog_format itself (use --set-vars binlog_format=ROW for its own sessions)",
	"switch-to-rbr":                 "a gh-ost flag; recast does not change global settings (SET GLOBAL binlog_format=ROW yourself)",
	"cut-over":                      "a gh-ost flag; recast's cut-over is always atomic (docs/cutover.md)",
	"default-retries":               "a gh-ost flag; use --cut-over-retries for the cut-over (recast retries other statements itself)",
	"dml-batch-size":                "a gh-ost flag; recast's applier batches by transaction, with --apply-threads parallel connections",
	"ssl":                           "a gh-ost flag; use --ssl-mode REQUIRED, VERIFY_CA or VERIFY_IDENTITY",
	"ssl-allow-insecure":            "a gh-ost flag; use --ssl-mode REQUIRED (encrypted, not verified)",
	"serve-tcp-port":                "a gh-ost flag; recast serves status and control over HTTP: --http 127.0.0.1:PORT",
	"attempt-instant-ddl":           "a gh-ost flag; recast tries INSTANT/NOCOPY by default (--method auto; --method copy forces the copy)",
	"checkpoint":                    "a gh-ost flag; recast always checkpoints (every --checkpoint-interval) and continues with --resume",
}

// ghostNoops are gh-ost's switches for what recast always does: accepted
// (true only) and ignored.
var ghostNoops = map[string]string{
	"allow-on-master":   "recast always runs on the primary it migrates on",
	"assume-rbr":        "recast reads binlog_format itself and refuses anything but ROW",
	"panic-on-warnings": "recast always fails a copy chunk whose warnings mean a changed value",
	"checkpoint":        "recast always checkpoints (every --checkpoint-interval)",
}

// ghostFlags are gh-ost's flags whose unit differs from recast's.
type ghostFlags struct {
	maxLagMillis        int64
	cutOverLockTimeoutS int64
	checkpointSeconds   int64
	noops               map[string]*bool
}

// addGhostFlags registers gh-ost's names on fs (hidden: --help shows
// recast's names; docs/gh-ost.md lists them).
func addGhostFlags(fs *pflag.FlagSet) *ghostFlags {
	g := &ghostFlags{}
	fs.Int64Var(&g.maxLagMillis, "max-lag-millis", 0, "gh-ost's --max-lag in milliseconds")
	fs.Int64Var(&g.cutOverLockTimeoutS, "cut-over-lock-timeout-seconds", 0, "gh-ost's --cut-over-lock-timeout in seconds")
	fs.Int64Var(&g.checkpointSeconds, "checkpoint-seconds", 0, "gh-ost's --checkpoint-interval in seconds")
	hidden := []string{"max-lag-millis", "cut-over-lock-timeout-seconds", "checkpoint-seconds"}
	g.noops = map[string]*bool{}
	for name, why := range ghostNoops {
		g.noops[name] = fs.Bool(name, false, "gh-ost's; accepted: "+why)
		hidden = append(hidden, name)
	}
	for _, n := range hidden {
		_ = fs.MarkHidden(n) // the flags exist: MarkHidden cannot fail
	}
	prev := fs.GetNormalizeFunc()
	fs.SetNormalizeFunc(func(f *pflag.FlagSet, name string) pflag.NormalizedName {
		if to, ok := ghostAliases[name]; ok {
			name = to
		}
		return prev(f, name)
	})
	return g
}

// apply converts the unit of the gh-ost flags that were given; giving a
// flag under both names is an error.
func (g *ghostFlags) apply(fs *pflag.FlagSet, o *migration.Options) error {
	both := func(ghost, recast string) error {
		if fs.Changed(ghost) && fs.Changed(recast) {
			return usagef("--%s and --%s are the same setting: give one", ghost, recast)
		}
		return nil
	}
	if fs.Changed("max-lag-millis") {
		if err := both("max-lag-millis", "max-lag"); err != nil {
			return err
		}
		if g.maxLagMillis < 0 {
			return usagef("--max-lag-millis must not be negative")
		}
		o.MaxLag = time.Duration(g.maxLagMillis) * time.Millisecond
	}
	if fs.Changed("cut-over-lock-timeout-seconds") {
		if err := both("cut-over-lock-timeout-seconds", "cut-over-lock-timeout"); err != nil {
			return err
		}
		if g.cutOverLockTimeoutS <= 0 {
			return usagef("--cut-over-lock-timeout-seconds must be positive")
		}
		o.CutOverLockTimeout = time.Duration(g.cutOverLockTimeoutS) * time.Second
	}
	if fs.Changed("checkpoint-seconds") {
		if err := both("checkpoint-seconds", "checkpoint-interval"); err != nil {
			return err
		}
		if g.checkpointSeconds <= 0 {
			return usagef("--checkpoint-seconds must be positive")
		}
		o.CheckpointInterval = time.Duration(g.checkpointSeconds) * time.Second
	}
	for name, v := range g.noops {
		if fs.Changed(name) && !*v {
			return usagef("--%s=false: %s; it cannot be turned off", name, ghostNoops[name])
		}
	}
	return nil
}
