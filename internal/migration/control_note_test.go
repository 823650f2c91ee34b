package migration

import (
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/status"
)

// TestCutOverNoteInStatus: while the cut-over waits for the backlog before
// requesting its lock, the status says why; and the applier runs without
// the throttle's delay once told to (no server needed).
func TestCutOverNoteInStatus(t *testing.T) {
	c := NewControl()
	c.setPhase(status.PhaseCutOver)
	if got := c.Status().ETA.Text; got != "cutting over" {
		t.Fatalf("ETA %q", got)
	}
	note := "the applier's backlog is not draining (catch-up rounds of 180ms and not shrinking): no lock is requested until it does"
	c.setCutOverNote(note)
	if got := c.Status().ETA.Text; !strings.Contains(got, "not draining") {
		t.Errorf("ETA %q, want the cut-over's note", got)
	}
	c.setCutOverNote("")
	if got := c.Status().ETA.Text; got != "cutting over" {
		t.Errorf("ETA %q after the note was cleared", got)
	}
	c.setPhase(status.PhaseChecksum)
	c.setFullSpeed(true)
	if d := c.applierDelay(); d != 0*time.Second {
		t.Errorf("applier delay %s at full speed", d)
	}
}
