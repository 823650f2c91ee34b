package pipeline

import (
	"os"
	"testing"

	"github.com/recast-osc/recast/internal/testutil"
)

// TestMain starts a sandbox for the tests that need one (none under -short)
// and fails the run if a test leaves a goroutine running.
func TestMain(m *testing.M) { os.Exit(testutil.NoLeaks(testutil.Main(m, 0))) }
