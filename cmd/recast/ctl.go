package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/recast-osc/recast/internal/migration"
	"github.com/recast-osc/recast/internal/status"
	"github.com/recast-osc/recast/internal/throttle"
)

// ctlUsage is recast ctl's help.
const ctlUsage = `usage: recast ctl --http HOST:PORT COMMAND
  status [--json]        phase, copy, apply vs incoming, backlog, replica lag, throttle, ETA
  pause | resume         pause the row copy (chunks in flight finish) / resume it
  set KEY=VALUE ...      threads, chunk-time, max-chunk-rows, max-lag, max-load, critical-load
  cutover                cut over now (removes the postpone flag file)
  abort [REASON]         stop the migration; before the cut-over the table is untouched
--http defaults to $RECAST_HTTP.
`

// ctlCmd is recast ctl: the client of a running migration's --http endpoint.
func ctlCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("recast ctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, ctlUsage) }
	addr := fs.String("http", os.Getenv("RECAST_HTTP"), "the migration's --http address (host:port)")
	asJSON := fs.Bool("json", false, "status: print the JSON of GET /status")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	// Flags after the command (recast ctl status --json) are accepted too.
	var cmdArgs []string
	for i := 0; i < len(rest); i++ {
		switch a := rest[i]; {
		case a == "--json" || a == "-json":
			*asJSON = true
		case (a == "--http" || a == "-http") && i+1 < len(rest):
			*addr = rest[i+1]
			i++
		case strings.HasPrefix(a, "--http=") || strings.HasPrefix(a, "-http="):
			*addr = a[strings.Index(a, "=")+1:]
		default:
			cmdArgs = append(cmdArgs, a)
		}
	}
	if *addr == "" || len(cmdArgs) == 0 {
		fmt.Fprint(stderr, ctlUsage)
		return 2
	}
	c := status.NewClient(*addr)
	cmd, params := cmdArgs[0], cmdArgs[1:]
	var msg string
	var err error
	switch cmd {
	case "status":
		var s status.Snapshot
		if s, err = c.Status(ctx); err == nil {
			if *asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				err = enc.Encode(s)
			} else {
				fmt.Fprint(stdout, s.Text())
			}
		}
	case "pause", "resume", "cutover", "unpostpone":
		if len(params) > 0 {
			fmt.Fprintf(stderr, "recast ctl %s: unexpected %q\n", cmd, params[0])
			return 2
		}
		msg, err = c.Post(ctx, cmd, nil)
	case "abort":
		v := url.Values{}
		if len(params) > 0 {
			v.Set("reason", strings.Join(params, " "))
		}
		msg, err = c.Post(ctx, "abort", v)
	case "set":
		if len(params) == 0 {
			fmt.Fprintf(stderr, "recast ctl set: give KEY=VALUE (keys: %s)\n", strings.Join(status.SettableKeys, ", "))
			return 2
		}
		v := url.Values{}
		for _, p := range params {
			k, val, ok := strings.Cut(p, "=")
			if !ok || k == "" {
				fmt.Fprintf(stderr, "recast ctl set: %q is not KEY=VALUE\n", p)
				return 2
			}
			v.Set(k, val)
		}
		msg, err = c.Post(ctx, "set", v)
	default:
		fmt.Fprintf(stderr, "recast ctl: unknown command %q\n\n%s", cmd, ctlUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "recast ctl: %s\n", flatError(err))
		return 1
	}
	if msg != "" {
		fmt.Fprintln(stdout, msg)
	}
	return 0
}

// controlFlags are recast migrate's throttling and control flags.
type controlFlags struct {
	maxLoad, criticalLoad string
	replicas              stringList
	httpAddr, socket      string
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// addControlFlags registers the flags on fs (defaults from o).
func addControlFlags(fs *flag.FlagSet, o *migration.Options) *controlFlags {
	c := &controlFlags{}
	fs.StringVar(&c.maxLoad, "max-load", "", "pause the copy while a global status variable exceeds its limit: VAR=N[,VAR=N...], e.g. Threads_running=25")
	fs.StringVar(&c.criticalLoad, "critical-load", "", "abort when a status variable exceeds its limit for --critical-load-grace: VAR=N[,...], e.g. Threads_running=100")
	fs.DurationVar(&o.CriticalLoadGrace, "critical-load-grace", o.CriticalLoadGrace, "how long a critical load must last to abort (0: at once)")
	fs.Var(&c.replicas, "replica", "replica HOST:PORT whose lag is watched (repeatable; default: the replicas SHOW SLAVE HOSTS lists)")
	fs.DurationVar(&o.MaxLag, "max-lag", time.Second, "pause the copy while a replica lags more (heartbeat every 100ms; 0: ignore replica lag)")
	fs.StringVar(&o.ThrottleFlagFile, "throttle-flag-file", "", "pause the copy while this file exists")
	fs.StringVar(&o.PanicFlagFile, "panic-flag-file", "", "abort the migration when this file appears")
	fs.StringVar(&c.httpAddr, "http", "", "serve status, metrics, the status page and control on this address, e.g. 127.0.0.1:8080 (off unless given)")
	fs.StringVar(&c.socket, "serve-socket-file", "", "also accept gh-ost's interactive commands on this unix socket")
	return c
}

// apply parses what needs parsing into o.
func (c *controlFlags) apply(o *migration.Options) error {
	var err error
	if o.MaxLoad, err = throttle.ParseThresholds(c.maxLoad); err != nil {
		return fmt.Errorf("--max-load: %w", err)
	}
	if o.CriticalLoad, err = throttle.ParseThresholds(c.criticalLoad); err != nil {
		return fmt.Errorf("--critical-load: %w", err)
	}
	o.Replicas = c.replicas
	return nil
}

// start serves a new Control as the flags ask; stop stops serving.
func (c *controlFlags) start(o migration.Options, stderr io.Writer) (*migration.Control, func(), error) {
	ctl := migration.NewControl()
	var closers []func() error
	stop := func() {
		for _, f := range closers {
			if err := f(); err != nil {
				fmt.Fprintf(stderr, "recast: stop the control endpoint: %v\n", err)
			}
		}
	}
	if c.httpAddr != "" {
		srv, err := status.Listen(c.httpAddr, ctl, o.Logger)
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, srv.Close)
		o.Logger.Info("status and control on http://"+srv.Addr()+"/", "control", "recast ctl --http "+srv.Addr()+" status|pause|resume|set k=v|cutover|abort")
	}
	if c.socket != "" {
		s, err := status.ListenSocket(c.socket, ctl, o.Logger)
		if err != nil {
			stop()
			return nil, nil, err
		}
		closers = append(closers, s.Close)
		o.Logger.Info("gh-ost commands on the unix socket "+c.socket, "example", "echo status | nc -U "+c.socket)
	}
	return ctl, stop, nil
}

// progressWriter is where log and progress lines go: stderr, or, when it
// is a terminal, a writer that keeps a progress bar on its last line.
func progressWriter(stderr io.Writer) io.Writer {
	if f, ok := stderr.(*os.File); ok && migration.IsTerminal(f) {
		return migration.NewTerminal(f)
	}
	return stderr
}
