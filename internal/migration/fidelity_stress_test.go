//go:build stress

package migration

import (
	"fmt"
	"testing"
)

// TestFidelityStress: every ALTER class of the fidelity suite on a larger
// table, three seeds each, every one with a postponed cut-over (writers run
// through the hold).
func TestFidelityStress(t *testing.T) {
	fidelityGlobals(t)
	for seed := range 3 {
		for i, c := range fidelityCases {
			c.postpone = true
			t.Run(fmt.Sprintf("%s-seed%d", c.name, seed), func(t *testing.T) {
				runFidelity(t, int64(100*seed+i), c, 20000)
			})
		}
	}
}
