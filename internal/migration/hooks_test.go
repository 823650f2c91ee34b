package migration

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/testutil"
)

// hookDir writes one hook per event that appends the event's name to
// out/events and its environment to out/<event>.env; extra bodies are
// added to the named events.
func hookDir(t *testing.T, extra map[string]string) (dir, out string) {
	t.Helper()
	dir, out = t.TempDir(), t.TempDir()
	for _, e := range []string{"on-startup", "on-validated", "on-rowcount-complete", "on-before-row-copy", "on-row-copy-complete",
		"on-begin-postponed", "on-before-cut-over", "on-success", "on-failure", "on-status"} {
		body := "#!/bin/sh\necho " + e + " >> " + filepath.Join(out, "events") + "\nenv > " + filepath.Join(out, e+".env.$$") + " && mv " + filepath.Join(out, e+".env.$$") + " " + filepath.Join(out, e+".env") + "\n" + extra[e] + "\n"
		name := "gh-ost-" + e
		if e == "on-success" {
			name = "recast-" + e + "-notify" // recast's prefix, with a suffix
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir, out
}

func events(t *testing.T, out string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "events"))
	if err != nil {
		t.Fatal(err)
	}
	var evs []string
	for _, e := range strings.Fields(string(b)) {
		if e != "on-status" {
			evs = append(evs, e)
		}
	}
	return evs
}

func envFile(t *testing.T, out, event string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, event+".env"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// TestHooksMigration: a real migration runs the hooks of each event in
// order, with the documented environment; on-status runs during the run;
// on-begin-postponed runs when the cut-over is postponed (its hook removes
// the flag file, which lets the cut-over go on).
func TestHooksMigration(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	seedTable(t, db)
	flag := filepath.Join(t.TempDir(), "postpone")
	dir, out := hookDir(t, map[string]string{"on-begin-postponed": "rm -f " + flag})
	o := testOptions(t, schema, "t", "ADD COLUMN c INT NOT NULL DEFAULT 7")
	o.HooksPath, o.HooksStatusInterval, o.HooksHint = dir, 100*time.Millisecond, "ticket-42"
	o.PostponeCutOverFlagFile = flag
	o.Pause = func(ctx context.Context, point string) {
		if point != "copy-done" {
			return
		}
		// Hold the run until on-status has run at least once.
		for ctx.Err() == nil {
			if _, err := os.Stat(filepath.Join(out, "on-status.env")); err == nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	res, err := runT(ctxFor(t, 2*time.Minute), o)
	if err != nil {
		t.Fatal(err)
	}
	want := "on-startup on-validated on-rowcount-complete on-before-row-copy on-row-copy-complete on-begin-postponed on-before-cut-over on-success"
	if got := strings.Join(events(t, out), " "); got != want {
		t.Errorf("events\n%s\nwant\n%s", got, want)
	}
	env := envFile(t, out, "on-success")
	for k, v := range map[string]string{
		"GH_OST_DATABASE_NAME": schema, "GH_OST_TABLE_NAME": "t", "GH_OST_GHOST_TABLE_NAME": "_t_new", "GH_OST_OLD_TABLE_NAME": "_t_old",
		"GH_OST_DDL": "ADD COLUMN c INT NOT NULL DEFAULT 7", "GH_OST_COPIED_ROWS": "3000", "GH_OST_DRY_RUN": "false",
		"GH_OST_HOOKS_HINT": "ticket-42", "RECAST_TABLE_NAME": "t",
		"GH_OST_MIGRATED_HOST": o.Conn.Host + ":" + strconv.Itoa(o.Conn.Port),
	} {
		if env[k] != v {
			t.Errorf("on-success: %s = %q, want %q", k, env[k], v)
		}
	}
	if n, _ := strconv.ParseInt(env["GH_OST_ESTIMATED_ROWS"], 10, 64); n <= 0 {
		t.Errorf("GH_OST_ESTIMATED_ROWS = %q", env["GH_OST_ESTIMATED_ROWS"])
	}
	el, _ := strconv.ParseFloat(env["GH_OST_ELAPSED_SECONDS"], 64)
	cp, _ := strconv.ParseFloat(env["GH_OST_ELAPSED_COPY_SECONDS"], 64)
	if cp <= 0 || el < cp {
		t.Errorf("elapsed %v, copy %v", el, cp)
	}
	if st := envFile(t, out, "on-status")["GH_OST_STATUS"]; !strings.Contains(st, "recast: ") {
		t.Errorf("GH_OST_STATUS = %q", st)
	}
	if res.CutOver.OldTable != "_t_old" {
		t.Errorf("old table %q", res.CutOver.OldTable)
	}
}

// TestHookBeforeCutOverFails: a failing on-before-cut-over hook aborts the
// migration before the swap: the table is untouched, the helper tables are
// gone, on-failure runs and on-success does not. A failing on-success hook
// is only reported.
func TestHookBeforeCutOverFails(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	seedTable(t, db)
	before := testutil.TableChecksum(t, db, schema, "t", "id")
	dir, out := hookDir(t, map[string]string{"on-before-cut-over": "echo 'change window closed' >&2; exit 1", "on-success": "exit 1"})
	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	o.HooksPath = dir
	_, err := runT(ctxFor(t, 2*time.Minute), o)
	if err == nil || !strings.Contains(err.Error(), "gh-ost-on-before-cut-over") || !strings.Contains(err.Error(), "change window closed") ||
		!strings.Contains(err.Error(), "table is untouched") {
		t.Fatalf("got %v", err)
	}
	want := "on-startup on-validated on-rowcount-complete on-before-row-copy on-row-copy-complete on-before-cut-over on-failure"
	if got := strings.Join(events(t, out), " "); got != want {
		t.Errorf("events\n%s\nwant\n%s", got, want)
	}
	if got := testutil.TableChecksum(t, db, schema, "t", "id"); got != before {
		t.Error("the table changed")
	}
	if got := strings.Join(tableNames(t, db, schema), ","); got != "t" {
		t.Errorf("tables: %s", got)
	}

	// A failing on-success hook: the migration succeeded all the same.
	if err := os.Remove(filepath.Join(dir, "gh-ost-on-before-cut-over")); err != nil {
		t.Fatal(err)
	}
	if _, err := runT(ctxFor(t, 2*time.Minute), o); err != nil {
		t.Fatalf("a failing on-success hook failed the migration: %v", err)
	}
	if got := strings.Join(tableNames(t, db, schema), ","); got != "_t_old,t" {
		t.Errorf("tables after the second run: %s", got)
	}
}

// TestHooksDryRun: the dry run runs the hooks up to on-rowcount-complete and
// on-success, with GH_OST_DRY_RUN=true; a missing hooks directory refuses.
func TestHooksDryRun(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	seedTable(t, db)
	dir, out := hookDir(t, nil)
	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	o.HooksPath, o.Execute = dir, false
	if _, err := runT(ctxFor(t, time.Minute), o); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(events(t, out), " "); got != "on-startup on-validated on-rowcount-complete on-success" {
		t.Errorf("events: %s", got)
	}
	if v := envFile(t, out, "on-success")["GH_OST_DRY_RUN"]; v != "true" {
		t.Errorf("GH_OST_DRY_RUN = %q", v)
	}
	o.HooksPath = filepath.Join(dir, "nosuch")
	if _, err := runT(ctxFor(t, time.Minute), o); err == nil || !strings.Contains(err.Error(), "--hooks-path") {
		t.Errorf("missing hooks directory: %v", err)
	}
}

// TestInteractiveCommandHook: a Control with hooks runs the
// on-interactive-command hooks with the command; a failing one refuses it.
// No server: the runner is built directly.
func TestInteractiveCommandHook(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	script := "#!/bin/sh\necho \"$GH_OST_COMMAND\" >> " + filepath.Join(out, "cmds") + "\n[ \"$GH_OST_COMMAND\" != panic ]\n"
	if err := os.WriteFile(filepath.Join(dir, "gh-ost-on-interactive-command"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := NewControl()
	ctx := context.Background()
	if err := c.InteractiveCommand(ctx, "throttle"); err != nil {
		t.Fatalf("without hooks: %v", err)
	}
	o := DefaultOptions()
	o.Database, o.Table, o.Alter, o.HooksPath = "d", "t", "FORCE", dir
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	h, err := newHookRunner(o, Runtime{Control: c}.withDefaults(), time.Now(), OldName("t"))
	if err != nil {
		t.Fatal(err)
	}
	detach := h.attach(c)
	if err := c.InteractiveCommand(ctx, "throttle"); err != nil {
		t.Fatal(err)
	}
	if err := c.InteractiveCommand(ctx, "panic"); err == nil {
		t.Error("a failing on-interactive-command hook did not refuse the command")
	}
	detach()
	if err := c.InteractiveCommand(ctx, "after"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "cmds"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(b)); strings.Join(got, " ") != "throttle panic" {
		t.Errorf("commands seen: %v", got)
	}
}
