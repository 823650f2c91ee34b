package main

import (
	"github.com/spf13/pflag"

	"github.com/recast-osc/recast/internal/migration"
)

// addThrottleCompatFlags registers gh-ost's further throttle sources and
// --exact-rowcount on fs (defaults from o; ranges checked by
// Options.Validate through package settings).
func addThrottleCompatFlags(fs *pflag.FlagSet, o *migration.Options) {
	fs.StringVar(&o.ThrottleQuery, "throttle-query", o.ThrottleQuery,
		"pause the copy while this query (run on the primary every second) returns a number above 0; an error pauses too (gh-ost's --throttle-query)")
	fs.StringVar(&o.ThrottleHTTP, "throttle-http", o.ThrottleHTTP,
		"pause the copy while a GET of this URL (every second) does not answer 200 OK (gh-ost's --throttle-http)")
	fs.DurationVar(&o.ThrottleHTTPTimeout, "throttle-http-timeout", o.ThrottleHTTPTimeout,
		"longest a --throttle-http request may take; no answer in time pauses the copy")
	fs.Float64Var(&o.MaxLatencyRatio, "max-latency-ratio", o.MaxLatencyRatio,
		"pace the copy so that a probe transaction (a one-row autocommit write, every 50 ms) stays within this many times its latency before the copy, while the application is active (no pacing while it is idle); 0: off, the fastest copy")
	fs.Float64Var(&o.NiceRatio, "nice-ratio", o.NiceRatio,
		"after each chunk, sleep this many times the chunk's time (gh-ost's --nice-ratio: 1 doubles the copy's time; 0: no sleep)")
	fs.Float64Var(&o.MaxCopyRate, "max-copy-rate", o.MaxCopyRate,
		"while the application is active (as --max-latency-ratio's probe sees it; always with --max-latency-ratio 0), copy at most this many rows a second, in short chunks; an idle server's copy is not capped (0: no cap)")
	fs.Float64Var(&o.MinCopyRate, "min-copy-rate", o.MinCopyRate,
		"the pacer (--max-latency-ratio) never slows the copy below this many rows a second, so that a copy under a steady load finishes; replica lag, load, flag files and --max-copy-rate still throttle it (0: no floor)")
	fs.BoolVar(&o.ExactRowcount, "exact-rowcount", o.ExactRowcount,
		"count the table's rows (SELECT COUNT(*), in the background) for the progress and the ETA instead of the statistics' estimate")
}
