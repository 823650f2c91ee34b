package main

import (
	"os"
	"regexp"
	"testing"
)

// TestGhostFlagTable: docs/gh-ost.md lists gh-ost's 108 flags once each,
// with a known status, and recast migrate accepts every flag marked same
// or alias.
func TestGhostFlagTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/gh-ost.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `--([a-z0-9-]+)` \\| ([a-z ]+) \\| (.*) \\|$")
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		name, status := m[1], m[2]
		if seen[name] {
			t.Errorf("--%s listed twice", name)
		}
		seen[name] = true
		switch status {
		case "same", "alias":
		case "different", "not applicable", "not yet":
			continue
		default:
			t.Errorf("--%s: unknown status %q", name, status)
			continue
		}
		if name == "help" || name == "version" {
			continue
		}
		if name == "ssl-cert" || name == "ssl-key" || name == "ask-pass" {
			// Need files or a terminal: the flag exists (TLS and --ask-pass
			// have their own tests).
			if newMigrateCmd(nil, nil).Flags().Lookup(name) == nil {
				t.Errorf("--%s does not exist", name)
			}
			continue
		}
		args := append([]string{}, required...)
		if name != "database" && name != "table" && name != "alter" {
			args = append(args, "--"+name+ghostSampleValue(name))
		}
		if _, code, out := parseMigrate(t, args...); code != 0 {
			t.Errorf("--%s (%s) is not accepted: exit %d %s", name, status, code, out)
		}
	}
	if len(seen) != 108 {
		t.Errorf("%d gh-ost flags in docs/gh-ost.md, want 108", len(seen))
	}
	for name := range ghostAliases {
		if !seen[name] {
			t.Errorf("alias --%s is not in docs/gh-ost.md", name)
		}
	}
	for name := range ghostHints {
		if !seen[name] {
			t.Errorf("hint for --%s, which docs/gh-ost.md does not list", name)
		}
	}
}

// ghostSampleValue is a valid value for a gh-ost flag in the test.
func ghostSampleValue(name string) string {
	switch name {
	case "host":
		return "=db1"
	case "port", "replica-server-id":
		return "=3307"
	case "user":
		return "=u"
	case "password":
		return "=pw"
	case "conf":
		return "="
	case "max-load", "critical-load":
		return "=Threads_running=50"
	case "nice-ratio":
		return "=0.5"
	case "max-lag-millis", "cut-over-lock-timeout-seconds", "checkpoint-seconds":
		return "=1500"
	case "throttle-query":
		return "=SELECT 0"
	case "throttle-http":
		return "=http://127.0.0.1:1/throttle"
	case "throttle-control-replicas":
		return "=r1:3306"
	case "throttle-flag-file", "postpone-cut-over-flag-file", "panic-flag-file", "serve-socket-file":
		return "=/tmp/recast-test-flag"
	case "hooks-path":
		return "=/nonexistent-hooks-dir" // parsed only: the dry run is not run here
	case "hooks-hint", "hooks-hint-owner", "hooks-hint-token":
		return "=text"
	case "hooks-status-interval":
		return "=60"
	}
	return "" // a switch
}
