// Command recast changes the schema of a live MariaDB/MySQL table without
// blocking it: see README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/recast-osc/recast/internal/migration"
)

// Set by the Makefile: go build -ldflags "-X main.version=... -X main.commit=...".
var (
	version = ""
	commit  = ""
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// exitCode ends a command with that exit status; its message has been
// printed.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// usageError is a wrong command line (exit 2): the message is printed with
// the command's name and a pointer to its help.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// run runs recast with args and returns the exit code: 0 ok, 1 the
// command failed, 2 the command line is wrong.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(ctx, stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var ec exitCode
	if errors.As(err, &ec) {
		return int(ec)
	}
	if cmd == nil {
		cmd = root
	}
	fmt.Fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", cmd.CommandPath(), usageMessage(cmd, err), cmd.CommandPath())
	return 2
}

func newRoot(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "recast",
		Short: "online schema change for MariaDB and MySQL",
		Long: `recast changes the schema of a live MariaDB/MySQL table without blocking it:
it copies the rows into a new table with the new definition, applies the
changes the application makes meanwhile from the binary log, and swaps the
tables in an atomic cut-over. Without --execute it only checks and plans.`,
		Example: `  recast sandbox up
  recast migrate --host 127.0.0.1 --port 13306 --user recast --database shop --table orders --alter "ADD COLUMN note VARCHAR(100)"
  recast migrate ... --execute
  recast ctl --http 127.0.0.1:8080 status`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       versionString(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(stderr)
			_ = cmd.Usage() // the usage text has been printed; its error is the writer's
			return exitCode(2)
		},
	}
	root.SetContext(ctx)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("recast {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{flagErrorMessage(c, err)} })
	root.SuggestionsMinimumDistance = 2
	root.AddCommand(newMigrateCmd(stdout, stderr), newCleanupCmd(stdout, stderr), newSandboxCmd(stdout, stderr),
		newCtlCmd(stdout, stderr), newVersionCmd(stdout), newManCmd(stdout))
	return root
}

// versionString is the version and commit: from the Makefile's -ldflags,
// else from the build information (go install module@version, VCS stamp).
func versionString() string {
	v, c := version, commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && c == "" {
				c = s.Value
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	if c == "" {
		c = "unknown"
	}
	return v + " (commit " + c + ")"
}

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print recast's version and git commit",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintf(stdout, "recast %s\n", versionString())
			return nil
		},
	}
}

// usageMessage is the one-line message of a usage error: cobra's unknown
// command message without its multi-line suggestion block.
func usageMessage(cmd *cobra.Command, err error) string {
	var ue usageError
	if errors.As(err, &ue) {
		return ue.msg
	}
	msg := err.Error()
	if first, rest, ok := strings.Cut(msg, "\n"); ok && strings.HasPrefix(first, "unknown command") {
		var sugg []string
		for _, l := range strings.Split(rest, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "Did you mean") {
				sugg = append(sugg, l)
			}
		}
		if len(sugg) > 0 {
			return first + "; did you mean " + strings.Join(sugg, " or ") + "?"
		}
		return first
	}
	if strings.HasPrefix(msg, "unknown flag") || strings.HasPrefix(msg, "unknown shorthand") {
		return flagErrorMessage(cmd, err)
	}
	return strings.Join(strings.Fields(msg), " ")
}

// flagErrorMessage turns pflag's "unknown flag: --hots" into "unknown flag
// --hots; did you mean --host?" (the command's flags within two edits, or
// that start with it), or names the recast equivalent of a gh-ost flag.
func flagErrorMessage(cmd *cobra.Command, err error) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return strings.Join(strings.Fields(msg), " ")
	}
	if hint, ok := ghostHints[name]; ok {
		return fmt.Sprintf("unknown flag --%s: %s", name, hint)
	}
	var near []string
	seen := map[string]bool{}
	visit := func(f *pflag.Flag) {
		if f.Hidden || seen[f.Name] {
			return
		}
		seen[f.Name] = true
		if d := levenshtein(name, f.Name); d <= 2 || (len(name) >= 3 && strings.HasPrefix(f.Name, name)) {
			near = append(near, "--"+f.Name)
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	sort.Strings(near)
	if len(near) > 3 {
		near = near[:3]
	}
	if len(near) == 0 {
		return "unknown flag --" + name
	}
	return "unknown flag --" + name + "; did you mean " + strings.Join(near, " or ") + "?"
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// newLogger logs to w as text (slog's key=value lines) or JSON.
func newLogger(w io.Writer, verbose bool, format string) (*slog.Logger, error) {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// flatError flattens an error for the one-line failure message; the errors
// of errors.Join are separated by "; ".
func flatError(err error) string {
	if errors.Is(err, migration.ErrInterrupted) {
		return "interrupted; the original table is untouched and progress was saved: run the same command with --resume to continue, or recast cleanup to abandon it"
	}
	if errors.Is(err, context.Canceled) {
		return "interrupted; the original table is untouched (helper tables, if any remain, are removed by recast cleanup)"
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok { //nolint:errorlint // only a top-level errors.Join is split
		var parts []string
		for _, e := range j.Unwrap() {
			parts = append(parts, strings.Join(strings.Fields(e.Error()), " "))
		}
		return strings.Join(parts, "; ")
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
