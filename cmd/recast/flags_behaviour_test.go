package main

import (
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/recast-osc/recast/internal/hooks"
	"github.com/recast-osc/recast/internal/migration"
)

func TestBehaviourFlags(t *testing.T) {
	o := migration.DefaultOptions()
	fs := pflag.NewFlagSet("migrate", pflag.ContinueOnError)
	addBehaviourFlags(fs, &o)
	if o.HooksTimeout != hooks.DefaultTimeout || o.HooksStatusInterval != hooks.DefaultStatusInterval {
		t.Errorf("defaults: timeout %s, status interval %s", o.HooksTimeout, o.HooksStatusInterval)
	}
	err := fs.Parse([]string{"--hooks-path", "/etc/recast/hooks", "--hooks-timeout", "90s", "--hooks-status-interval", "600",
		"--hooks-hint", "h", "--hooks-hint-owner", "dba", "--hooks-hint-token", "T-1",
		"--timestamp-old-table", "--initially-drop-old-table", "--initially-drop-ghost-table"})
	if err != nil {
		t.Fatal(err)
	}
	if o.HooksPath != "/etc/recast/hooks" || o.HooksTimeout != 90*time.Second || o.HooksStatusInterval != 10*time.Minute ||
		o.HooksHint != "h" || o.HooksHintOwner != "dba" || o.HooksHintToken != "T-1" ||
		!o.TimestampOldTable || !o.InitiallyDropOldTable || !o.InitiallyDropGhostTable {
		t.Errorf("parsed: %+v", o)
	}
	for _, bad := range []string{"-5", "soon", "-1s"} {
		fs := pflag.NewFlagSet("migrate", pflag.ContinueOnError)
		o := migration.DefaultOptions()
		addBehaviourFlags(fs, &o)
		if err := fs.Parse([]string{"--hooks-timeout", bad}); err == nil {
			t.Errorf("--hooks-timeout %s accepted", bad)
		}
	}
}
