package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/recast-osc/recast/internal/migration"
	"github.com/recast-osc/recast/internal/status"
	"github.com/recast-osc/recast/internal/throttle"
)

// ctlUsage is recast ctl's help.
const ctlUsage = `usage: recast ctl --http HOST:PORT [--http-token T] COMMAND
  status [--json]        phase, copy, apply vs incoming, backlog, replica lag, throttle, ETA (alias: info)
  pause | resume         pause the row copy (chunks in flight finish) / resume it
                         (gh-ost's throttle / no-throttle, unthrottle)
  set KEY=VALUE ...      threads, chunk-time, max-chunk-rows, max-lag, max-load, critical-load, throttle-query
  cutover                cut over now (removes the postpone flag file; aliases: unpostpone, no-postpone)
  coordinates            the binlog position applied to the new table
  abort [REASON]         stop the migration; before the cut-over the table is untouched (alias: panic)
--http defaults to $RECAST_HTTP, --http-token to $RECAST_HTTP_TOKEN.
`

// newCtlCmd is recast ctl: the client of a running migration's --http
// endpoint.
func newCtlCmd(stdout, stderr io.Writer) *cobra.Command {
	var addr, token string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ctl COMMAND",
		Short: "steer a running migration through its --http endpoint",
		Long:  ctlUsage,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				fmt.Fprint(stderr, ctlUsage)
				return exitCode(2)
			}
			msg := fmt.Sprintf("unknown command %q", args[0])
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return usageError{msg + " (commands: status, pause, resume, set, cutover, coordinates, abort)"}
		},
	}
	cmd.SuggestionsMinimumDistance = 2
	pf := cmd.PersistentFlags()
	pf.StringVar(&addr, "http", os.Getenv("RECAST_HTTP"), "the migration's --http address (host:port)")
	pf.StringVar(&token, "http-token", os.Getenv("RECAST_HTTP_TOKEN"), "the migration's --http-token")
	client := func() (*status.Client, error) {
		if addr == "" {
			fmt.Fprint(stderr, ctlUsage)
			return nil, exitCode(2)
		}
		c := status.NewClient(addr)
		c.Token = token
		return c, nil
	}
	done := func(msg string, err error) error {
		if err != nil {
			fmt.Fprintf(stderr, "recast ctl: %s\n", flatError(err))
			return exitCode(1)
		}
		if msg != "" {
			fmt.Fprintln(stdout, msg)
		}
		return nil
	}
	noArgs := func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unexpected %q", args[0])
		}
		return nil
	}
	post := func(use, path, short string, aliases ...string) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Aliases: aliases, Args: noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				c, err := client()
				if err != nil {
					return err
				}
				return done(c.Post(cmd.Context(), path, nil))
			}}
	}
	statusCmd := &cobra.Command{Use: "status", Aliases: []string{"info"}, Short: "show the migration's progress", Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			s, err := c.Status(cmd.Context())
			if err == nil {
				if asJSON {
					enc := json.NewEncoder(stdout)
					enc.SetIndent("", "  ")
					err = enc.Encode(s)
				} else {
					fmt.Fprint(stdout, s.Text())
				}
			}
			return done("", err)
		}}
	statusCmd.Flags().BoolVar(&asJSON, "json", false, "print the JSON of GET /status")
	coordinates := &cobra.Command{Use: "coordinates", Short: "print the binlog position applied to the new table", Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			s, err := c.Status(cmd.Context())
			if err == nil && s.Apply.AppliedPosition == "" {
				err = fmt.Errorf("no binlog position applied yet (phase %s)", s.Phase)
			}
			return done(s.Apply.AppliedPosition, err)
		}}
	set := &cobra.Command{Use: "set KEY=VALUE ...", Short: "change settings: " + strings.Join(status.SettableKeys, ", "),
		RunE: func(cmd *cobra.Command, params []string) error {
			if len(params) == 0 {
				return usagef("give KEY=VALUE (keys: %s)", strings.Join(status.SettableKeys, ", "))
			}
			v := url.Values{}
			for _, p := range params {
				k, val, ok := strings.Cut(p, "=")
				if !ok || k == "" {
					return usagef("%q is not KEY=VALUE", p)
				}
				v.Set(k, val)
			}
			c, err := client()
			if err != nil {
				return err
			}
			return done(c.Post(cmd.Context(), "set", v))
		}}
	abort := &cobra.Command{Use: "abort [REASON]", Aliases: []string{"panic"}, Short: "stop the migration (before the cut-over the table is untouched)",
		RunE: func(cmd *cobra.Command, params []string) error {
			v := url.Values{}
			if len(params) > 0 {
				v.Set("reason", strings.Join(params, " "))
			}
			c, err := client()
			if err != nil {
				return err
			}
			return done(c.Post(cmd.Context(), "abort", v))
		}}
	cmd.AddCommand(statusCmd,
		post("pause", "pause", "pause the row copy (chunks in flight finish)", "throttle"),
		post("resume", "resume", "resume the row copy (other throttle reasons still apply)", "no-throttle", "unthrottle"),
		post("cutover", "cutover", "cut over now (removes the postpone flag file)", "unpostpone", "no-postpone", "cut-over"),
		set, coordinates, abort)
	return cmd
}

// controlFlags are recast migrate's throttling and control flags.
type controlFlags struct {
	maxLoad, criticalLoad string
	replicas              []string
	httpAddr, httpToken   string
	socket                string
}

// addControlFlags registers the flags on fs (defaults from o).
func addControlFlags(fs *pflag.FlagSet, o *migration.Options) *controlFlags {
	c := &controlFlags{}
	fs.StringVar(&c.maxLoad, "max-load", "", "pause the copy while a global status variable exceeds its limit: VAR=N[,VAR=N...], e.g. Threads_running=25")
	fs.StringVar(&c.criticalLoad, "critical-load", "", "abort when a status variable exceeds its limit for --critical-load-grace: VAR=N[,...], e.g. Threads_running=100")
	fs.DurationVar(&o.CriticalLoadGrace, "critical-load-grace", o.CriticalLoadGrace, "how long a critical load must last to abort (0: at once)")
	fs.StringSliceVar(&c.replicas, "replica", nil, "replica HOST:PORT whose lag is watched (repeatable or comma-separated; default: the replicas SHOW SLAVE HOSTS lists)")
	fs.DurationVar(&o.MaxLag, "max-lag", o.MaxLag, "pause the copy while a replica lags more (heartbeat every 100ms; 0: ignore replica lag)")
	fs.StringVar(&o.ThrottleFlagFile, "throttle-flag-file", "", "pause the copy while this file exists")
	fs.StringVar(&o.PanicFlagFile, "panic-flag-file", "", "abort the migration when this file appears")
	fs.StringVar(&c.httpAddr, "http", "", "serve status, metrics, the status page and control on this address, e.g. 127.0.0.1:8080 (off unless given; beyond loopback only with --http-token)")
	fs.StringVar(&c.httpToken, "http-token", "", "bearer token every --http request must carry (default $RECAST_HTTP_TOKEN; required when --http listens beyond loopback)")
	fs.StringVar(&c.socket, "serve-socket-file", "", "also accept gh-ost's interactive commands on this unix socket (mode 0600)")
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
	if c.httpToken == "" {
		c.httpToken = os.Getenv("RECAST_HTTP_TOKEN")
	}
	return nil
}

// start serves a new Control as the flags ask; stop stops serving.
func (c *controlFlags) start(log *slog.Logger, stderr io.Writer) (*migration.Control, func(), error) {
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
		srv, err := status.ListenAuth(c.httpAddr, c.httpToken, ctl, log)
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, srv.Close)
		hint := "recast ctl --http " + srv.Addr()
		if c.httpToken != "" {
			hint += " --http-token ..."
		}
		log.Info("status and control on http://"+srv.Addr()+"/", "control", hint+" status|pause|resume|set k=v|cutover|abort")
		if !srv.Loopback() {
			log.Warn("the control endpoint listens beyond this machine: whoever has the token can abort or cut over the migration, and the traffic is not encrypted (HTTP)", "http", srv.Addr())
		}
	}
	if c.socket != "" {
		s, err := status.ListenSocket(c.socket, ctl, log)
		if err != nil {
			stop()
			return nil, nil, err
		}
		closers = append(closers, s.Close)
		log.Info("gh-ost commands on the unix socket "+c.socket, "example", "echo status | nc -U "+c.socket)
	}
	return ctl, stop, nil
}

// progressWriter is where log and progress lines go: stderr, or, when it
// is a terminal (and TERM is not dumb), a writer that keeps a progress bar
// on its last line. A file or pipe gets plain lines, no escape sequences.
func progressWriter(stderr io.Writer) io.Writer {
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		return migration.NewTerminal(f)
	}
	return stderr
}

func isTerminal(f *os.File) bool {
	if os.Getenv("TERM") == "dumb" || os.Getenv("NO_COLOR") != "" {
		return false
	}
	return term.IsTerminal(int(f.Fd())) //nolint:gosec // a file descriptor fits in an int
}
