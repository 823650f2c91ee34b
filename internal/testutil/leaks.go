package testutil

import (
	"fmt"
	"os"

	"go.uber.org/goleak"
)

// NoLeaks checks, after Main has returned code, that the tests left no
// goroutine running, and turns a passing code into a failure if they did:
//
//	func TestMain(m *testing.M) { os.Exit(testutil.NoLeaks(testutil.Main(m, 0))) }
//
// It checks only after a passing run: a failed test may leave goroutines
// behind that say nothing about the code.
func NoLeaks(code int, opts ...goleak.Option) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(opts...); err != nil {
		fmt.Fprintf(os.Stderr, "testutil: goroutines left running after the tests: %v\n", err)
		return 1
	}
	return 0
}
