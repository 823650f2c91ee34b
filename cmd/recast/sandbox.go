package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/recast-osc/recast/internal/sandbox"
)

const sandboxUsage = `usage: recast sandbox up|down|status [flags]

Throwaway local servers (a primary and replicas) for trying recast:
--flavor mariadb-10.11 (the installed MariaDB), mariadb-11.8 or mysql-9.7
(fetched by scripts/fetch-flavor.sh into the flavor cache when missing).

  up      initialise and start the servers, print how to connect
  status  show the servers, whether they run, and replication state
  down    stop the servers and remove the sandbox dir

flags:
`

// sandboxCmd implements `recast sandbox`. args are the arguments after
// "sandbox". It returns the exit code: 0 ok, 1 error, 2 usage.
func sandboxCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("recast sandbox", flag.ContinueOnError)
	flags.SetOutput(stderr)
	dir := flags.String("dir", "./.sandbox", "sandbox `directory` (state, datadirs, logs)")
	port := flags.Int("port", 13306, "primary `port` (replica i listens on port+i); up only")
	replicas := flags.Int("replicas", 1, "number of replicas; up only")
	fast := flags.Bool("fast", false, "trade durability for speed (no flushing, small buffer pool); up only")
	quiet := flags.Bool("quiet", false, "no progress messages; up only")
	flavorName := flags.String("flavor", sandbox.DefaultFlavor, "server `flavor`: "+strings.Join(sandbox.Flavors, ", ")+"; up only")
	flags.Usage = func() {
		fmt.Fprint(flags.Output(), sandboxUsage)
		flags.PrintDefaults()
	}

	if len(args) == 0 {
		flags.Usage()
		return 2
	}
	sub := args[0]
	switch sub {
	case "-h", "-help", "--help", "help":
		flags.Usage()
		return 0
	case "up", "down", "status":
	default:
		fmt.Fprintf(stderr, "recast sandbox: unknown command %q\n", sub)
		flags.Usage()
		return 2
	}
	if err := flags.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "recast sandbox %s: unexpected arguments: %s\n", sub, strings.Join(flags.Args(), " "))
		return 2
	}
	if sub != "up" {
		var bad []string
		flags.Visit(func(f *flag.Flag) {
			if f.Name != "dir" {
				bad = append(bad, "--"+f.Name)
			}
		})
		if len(bad) > 0 {
			fmt.Fprintf(stderr, "recast sandbox %s: flag %s applies only to up\n", sub, strings.Join(bad, ", "))
			return 2
		}
	}
	if *replicas < 0 || *port <= 0 || *port+*replicas > 65535 {
		fmt.Fprintf(stderr, "recast sandbox: invalid --port %d / --replicas %d\n", *port, *replicas)
		return 2
	}

	fail := func(err error) int {
		fmt.Fprintf(stderr, "recast sandbox: %s\n", oneLine(err))
		return 1
	}
	switch sub {
	case "up":
		level := slog.LevelInfo
		if *quiet {
			level = slog.LevelWarn
		}
		log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
		sb, err := sandbox.Up(ctx, sandbox.Config{Dir: *dir, Port: *port, Replicas: *replicas, Fast: *fast, Flavor: *flavorName, Logger: log})
		if err != nil {
			return fail(err)
		}
		printSandbox(stdout, sb, nil)
		return 0
	case "status":
		sb, err := sandbox.Status(ctx, *dir)
		if sb == nil {
			return fail(err)
		}
		printSandbox(stdout, sb, sb.Check(ctx))
		if err != nil {
			return fail(err)
		}
		return 0
	default: // down
		if _, err := os.Stat(*dir); errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(stdout, "no sandbox in %s\n", *dir)
			return 0
		}
		if err := sandbox.Down(ctx, *dir); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "sandbox in %s stopped and removed\n", *dir)
		return 0
	}
}

// printSandbox prints connection details, and health when checks is non-nil.
func printSandbox(w io.Writer, sb *sandbox.Sandbox, checks []sandbox.InstanceStatus) {
	fmt.Fprintf(w, "sandbox: %s\n", sb.Dir)
	for i, inst := range sb.Instances() {
		role := "primary"
		if i > 0 {
			role = "replica"
		}
		fmt.Fprintf(w, "  %-8s %-9s %-16s pid %-7d server_id %d\n", inst.Name, role, inst.Addr(), inst.PID, inst.ServerID)
		if checks != nil && i < len(checks) {
			c := checks[i]
			switch {
			case !c.Alive:
				fmt.Fprintf(w, "           state: NOT RUNNING\n")
			case !c.Answering:
				fmt.Fprintf(w, "           state: running, NOT ANSWERING (%s)\n", c.Error)
			default:
				fmt.Fprintf(w, "           state: running\n")
			}
			if c.Replica && c.Replication != nil {
				r := c.Replication
				behind := "NULL"
				if r.SecondsBehindMaster != nil {
					behind = fmt.Sprintf("%ds", *r.SecondsBehindMaster)
				}
				fmt.Fprintf(w, "           replication: IO %s, SQL %s, Seconds_Behind_Master %s, Gtid_IO_Pos %q\n",
					r.IORunning, r.SQLRunning, behind, r.GTIDIOPos)
				if r.LastIOError != "" {
					fmt.Fprintf(w, "           last IO error: %s\n", r.LastIOError)
				}
				if r.LastSQLError != "" {
					fmt.Fprintf(w, "           last SQL error: %s\n", r.LastSQLError)
				}
			} else if c.Replica && c.Answering {
				fmt.Fprintf(w, "           replication: unknown (%s)\n", c.Error)
			}
		}
		fmt.Fprintf(w, "           datadir %s\n", inst.DataDir)
	}
	p := sb.Primary
	fmt.Fprintf(w, "user: %s  password: %s\n", sb.User, sb.Password)
	fmt.Fprintf(w, "connect: mariadb -h%s -P%d -u%s -p%s\n", p.Host, p.Port, sb.User, sb.Password)
	fmt.Fprintf(w, "migrate: recast migrate --host %s --port %d --user %s --password %s ...\n", p.Host, p.Port, sb.User, sb.Password)
	fmt.Fprintf(w, "stop:    recast sandbox down --dir %s\n", sb.Dir)
}

// oneLine renders err on one line: the first line of each joined error
// (further lines carry details such as log tails), without the package
// prefix.
func oneLine(err error) string {
	var parts []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		first, _, _ := strings.Cut(strings.TrimSpace(e.Error()), "\n")
		parts = append(parts, strings.TrimPrefix(first, "sandbox: "))
	}
	walk(err)
	return strings.Join(parts, "; ")
}
