package migration

import (
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/settings"
	"github.com/recast-osc/recast/internal/status"
	"github.com/recast-osc/recast/internal/throttle"
)

// TestValidateUsesSettings: Options.Validate checks the ranges the live
// control checks (package settings), chunk-time included; the defaults are
// the settings' (one --max-lag default).
func TestValidateUsesSettings(t *testing.T) {
	o := DefaultOptions()
	if o.MaxLag != settings.MaxLag.Default || o.ChunkTime != settings.ChunkTime.Default || o.Threads != settings.Threads.Default {
		t.Fatalf("defaults: max-lag %s chunk-time %s threads %d", o.MaxLag, o.ChunkTime, o.Threads)
	}
	o.Database, o.Table, o.Alter = "d", "t", "FORCE"
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	for _, c := range []struct {
		set  func(*Options)
		want string
	}{
		{func(o *Options) { o.ChunkTime = 0 }, "--chunk-time must be 1ms to 1m"},
		{func(o *Options) { o.ChunkTime = time.Hour }, "--chunk-time must be 1ms to 1m"},
		{func(o *Options) { o.Threads = 65 }, "--threads must be 1..64"},
		{func(o *Options) { o.MaxChunkRows = 0 }, "--max-chunk-rows must be 1..10000000"},
		{func(o *Options) { o.MaxLag = -time.Second }, "--max-lag must be 0 or more"},
		{func(o *Options) { o.ThrottleHTTP = "localhost:8080" }, "--throttle-http must be an http:// or https:// URL"},
	} {
		bad := o
		c.set(&bad)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
}

// TestApplierDelayLockFree: the pump's delay hook takes no lock of the
// Control's (it is asked per event under back-pressure).
func TestApplierDelayLockFree(t *testing.T) {
	c := NewControl()
	th := throttle.New(throttle.Config{})
	c.th.Store(th)
	c.mu.Lock()
	done := make(chan time.Duration, 1)
	go func() { done <- c.applierDelay() }()
	select {
	case d := <-done:
		if d != 0 {
			t.Errorf("delay %s without lag", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("applierDelay waits for the Control's mutex")
	}
	c.mu.Unlock()
	c.setPhase(status.PhaseCutOver)
	if !c.cutting.Load() {
		t.Error("the cut-over phase is not seen by applierDelay")
	}
}

// TestLiteralModes: the sql_mode flags under which the applier's literals
// are not the row's values are refused, each by name; the others pass.
func TestLiteralModes(t *testing.T) {
	for _, c := range []struct {
		mode, refused string
	}{
		{"STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION", ""},
		{"", ""},
		{"STRICT_ALL_TABLES,EMPTY_STRING_IS_NULL,SIMULTANEOUS_ASSIGNMENT", "EMPTY_STRING_IS_NULL"},
		{"pad_char_to_full_length", "PAD_CHAR_TO_FULL_LENGTH"},
	} {
		err := literalModes(c.mode)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%q: refused: %v", c.mode, err)
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%q: want a refusal naming %s, got %v", c.mode, c.refused, err)
		}
	}
}
