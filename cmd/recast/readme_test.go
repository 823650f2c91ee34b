package main

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestReadmeFlags: the README's flag tables name every flag of recast
// migrate that --help shows, and no other.
func TestReadmeFlags(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "<!-- flags:begin")
	section, _, ok2 := strings.Cut(section, "<!-- flags:end -->")
	if !ok || !ok2 {
		t.Fatal("README.md lacks the flags:begin / flags:end markers")
	}
	inReadme := map[string]bool{}
	first := regexp.MustCompile(`(?m)^\| ([^|]+) \|`)
	flag := regexp.MustCompile("`--([a-z0-9-]+)`")
	for _, row := range first.FindAllStringSubmatch(section, -1) {
		for _, f := range flag.FindAllStringSubmatch(row[1], -1) {
			inReadme[f[1]] = true
		}
	}
	inCLI := map[string]bool{}
	newMigrateCmd(nil, nil).Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			inCLI[f.Name] = true
		}
	})
	var missing, extra []string
	for f := range inCLI {
		if !inReadme[f] {
			missing = append(missing, "--"+f)
		}
	}
	for f := range inReadme {
		if !inCLI[f] {
			extra = append(extra, "--"+f)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("flags of recast migrate the README's flag tables lack: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("flags in the README's flag tables that recast migrate lacks: %v", extra)
	}
	if len(inCLI) < 40 {
		t.Errorf("only %d flags found: the flag set was not read", len(inCLI))
	}
}
