package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/recast-osc/recast/internal/migration"
)

// addBehaviourFlags registers the hooks and helper-table options (gh-ost's
// names): --hooks-path and friends (docs/hooks.md), --timestamp-old-table,
// --initially-drop-old-table, --initially-drop-ghost-table.
func addBehaviourFlags(fs *pflag.FlagSet, o *migration.Options) {
	fs.StringVar(&o.HooksPath, "hooks-path", o.HooksPath,
		"directory of hooks: executables named gh-ost-on-<event>* or recast-on-<event>* run at each event (docs/hooks.md)")
	fs.Var(secondsOrDuration{&o.HooksTimeout}, "hooks-timeout",
		"longest one hook may run before it is killed with its process group (a duration, or seconds)")
	fs.Var(secondsOrDuration{&o.HooksStatusInterval}, "hooks-status-interval",
		"how often the on-status hooks run (a duration, or seconds as gh-ost takes it; 0: never)")
	fs.StringVar(&o.HooksHint, "hooks-hint", o.HooksHint, "free text passed to hooks as GH_OST_HOOKS_HINT")
	fs.StringVar(&o.HooksHintOwner, "hooks-hint-owner", o.HooksHintOwner, "free text passed to hooks as GH_OST_HOOKS_HINT_OWNER")
	fs.StringVar(&o.HooksHintToken, "hooks-hint-token", o.HooksHintToken, "free text passed to hooks as GH_OST_HOOKS_HINT_TOKEN")
	fs.BoolVar(&o.TimestampOldTable, "timestamp-old-table", o.TimestampOldTable,
		"keep the original table as _T_<YYYYMMDDhhmmss>_old (UTC) instead of _T_old, so an earlier migration's _T_old is no obstacle")
	fs.BoolVar(&o.InitiallyDropOldTable, "initially-drop-old-table", o.InitiallyDropOldTable,
		"drop a table under the old table's name before starting, instead of refusing to start")
	fs.BoolVar(&o.InitiallyDropGhostTable, "initially-drop-ghost-table", o.InitiallyDropGhostTable,
		"drop an interrupted run's ghost (_T_new), checkpoint and swap-renamed ghost before starting, instead of refusing (not with --resume)")
}

// secondsOrDuration is a duration flag that also takes a plain number of
// seconds (gh-ost's --hooks-status-interval 60).
type secondsOrDuration struct{ d *time.Duration }

func (s secondsOrDuration) String() string {
	if s.d == nil {
		return "0s"
	}
	return s.d.String()
}

func (s secondsOrDuration) Set(v string) error {
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if n < 0 {
			return fmt.Errorf("must not be negative: %s", v)
		}
		*s.d = time.Duration(n * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("not a duration (e.g. 30s, 2m) nor a number of seconds: %q", v)
	}
	if d < 0 {
		return fmt.Errorf("must not be negative: %s", v)
	}
	*s.d = d
	return nil
}

func (secondsOrDuration) Type() string { return "duration" }
