package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/recast-osc/recast/internal/sandbox"
)

const sandboxLong = `Throwaway local servers (a primary and replicas) for trying recast:
--flavor mariadb-10.11 (the installed MariaDB), mariadb-11.8 or mysql-9.7
(fetched by scripts/fetch-flavor.sh into the flavor cache when missing).`

// newSandboxCmd is recast sandbox up|down|status.
func newSandboxCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		dir, flavorName string
		port, replicas  int
		fast, quiet     bool
	)
	fail := func(err error) error {
		fmt.Fprintf(stderr, "recast sandbox: %s\n", oneLine(err))
		return exitCode(1)
	}
	cmd := &cobra.Command{
		Use:   "sandbox up|down|status",
		Short: "start, inspect or remove throwaway local servers to try recast on",
		Long:  sandboxLong,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				cmd.SetOut(stderr)
				_ = cmd.Usage() // printed; the error is the writer's
				return exitCode(2)
			}
			return usagef("unknown command %q (commands: up, status, down)", args[0])
		},
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", "./.sandbox", "sandbox `directory` (state, datadirs, logs)")
	up := &cobra.Command{
		Use:   "up",
		Short: "initialise and start the servers, print how to connect",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if replicas < 0 || port <= 0 || port+replicas > 65535 {
				return usagef("invalid --port %d / --replicas %d", port, replicas)
			}
			level := slog.LevelInfo
			if quiet {
				level = slog.LevelWarn
			}
			log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
			sb, err := sandbox.Up(cmd.Context(), sandbox.Config{Dir: dir, Port: port, Replicas: replicas, Fast: fast, Flavor: flavorName, Logger: log})
			if err != nil {
				return fail(err)
			}
			printSandbox(stdout, sb, nil)
			return nil
		},
	}
	up.Flags().IntVar(&port, "port", 13306, "primary `port` (replica i listens on port+i)")
	up.Flags().IntVar(&replicas, "replicas", 1, "number of replicas")
	up.Flags().BoolVar(&fast, "fast", false, "trade durability for speed (no flushing, small buffer pool)")
	up.Flags().BoolVar(&quiet, "quiet", false, "no progress messages")
	up.Flags().StringVar(&flavorName, "flavor", sandbox.DefaultFlavor, "server `flavor`: "+strings.Join(sandbox.Flavors, ", "))
	_ = up.RegisterFlagCompletionFunc("flavor", fixedCompletion(sandbox.Flavors...))
	statusCmd := &cobra.Command{
		Use:   "status",
		Short: "show the servers, whether they run, and replication state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sb, err := sandbox.Status(cmd.Context(), dir)
			if sb == nil {
				return fail(err)
			}
			printSandbox(stdout, sb, sb.Check(cmd.Context()))
			if err != nil {
				return fail(err)
			}
			return nil
		},
	}
	down := &cobra.Command{
		Use:   "down",
		Short: "stop the servers and remove the sandbox dir",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(stdout, "no sandbox in %s\n", dir)
				return nil
			}
			if err := sandbox.Down(cmd.Context(), dir); err != nil {
				return fail(err)
			}
			fmt.Fprintf(stdout, "sandbox in %s stopped and removed\n", dir)
			return nil
		},
	}
	cmd.AddCommand(up, statusCmd, down)
	return cmd
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
