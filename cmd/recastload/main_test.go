package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/recast-osc/recast/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.NoLeaks(testutil.Main(m, 0))) }

func connArgs(t *testing.T, schema string) []string {
	sb := testutil.Sandbox(t)
	return []string{"--host", sb.Primary.Host, "--port", strconv.Itoa(sb.Primary.Port),
		"--user", sb.User, "--password", sb.Password, "--database", schema, "--table", "orders"}
}

func runMain(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := realMain(args, &out, &errOut)
	t.Logf("recastload %s -> %d\nstdout:\n%sstderr:\n%s", strings.Join(args, " "), code, out.String(), errOut.String())
	return code, out.String() + errOut.String()
}

func TestRunVerify(t *testing.T) {
	schema := testutil.NewSchema(t)
	args := append(connArgs(t, schema), "run", "--rows", "1000", "--writers", "3", "--rate", "0",
		"--duration", "2s", "--status-interval", "500ms", "--verify", "--seed", "3")
	code, out := runMain(t, args...)
	if code != 0 || !strings.Contains(out, "RESULT: OK (table verified)") || !strings.Contains(out, "prepared 1000 rows") {
		t.Fatalf("run: exit %d, want 0 and a verified result", code)
	}

	// The table exists now: run --rows refuses to replace it unless told to.
	if code, out := runMain(t, args...); code != 1 || !strings.Contains(out, "--drop-existing") {
		t.Fatalf("run on an existing table: exit %d, want 1 and a hint about --drop-existing", code)
	}

	// Without --rows, run starts from the table as it is.
	args = append(connArgs(t, schema), "run", "--writers", "2", "--duration", "1s", "--verify")
	if code, out := runMain(t, args...); code != 0 || !strings.Contains(out, "prepared from the existing table") ||
		!strings.Contains(out, "RESULT: OK (table verified)") {
		t.Fatalf("run without --rows: exit %d, want 0 and a verified result", code)
	}
}

func TestVerifyDetectsDifference(t *testing.T) {
	schema := testutil.NewSchema(t)
	// A wrong rename mapping makes verify compare the wrong column.
	args := append(connArgs(t, schema), "run", "--rows", "200", "--writers", "1", "--duration", "500ms",
		"--verify", "--verify-rename", "vc=txt")
	code, out := runMain(t, args...)
	if code != 1 || !strings.Contains(out, "RESULT: FAILED") || !strings.Contains(out, "different") {
		t.Fatalf("exit %d, want 1 with differences reported", code)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"run"}, // no --database/--table
		{"--database", "d", "--table", "t", "run", "--verify-rename", "novalue"},
		{"--database", "d", "--table", "t", "run", "extra"},
	} {
		if code, _ := runMain(t, args...); code != 2 {
			t.Errorf("recastload %v: exit %d, want 2", args, code)
		}
	}
}
