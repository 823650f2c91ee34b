package settings

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/status"
)

func TestIntRange(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		ok   bool
	}{{"1", 1, true}, {" 64 ", 64, true}, {"0", 0, false}, {"65", 0, false}, {"x", 0, false}, {"-1", 0, false}} {
		got, err := Threads.Parse(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("threads=%q: %d, %v", c.in, got, err)
		}
	}
	if err := Threads.Check(Threads.Default); err != nil {
		t.Errorf("default refused: %v", err)
	}
	if err := Threads.Check(0); err == nil || !strings.Contains(err.Error(), "--threads must be 1..64") {
		t.Errorf("check 0: %v", err)
	}
}

func TestDurationRange(t *testing.T) {
	for _, c := range []struct {
		d    Duration
		in   string
		want time.Duration
		ok   bool
	}{
		{ChunkTime, "50ms", 50 * time.Millisecond, true},
		{ChunkTime, "0s", 0, false},
		{ChunkTime, "2m", 0, false},
		{ChunkTime, "fast", 0, false},
		{MaxLag, "0", 0, true},
		{MaxLag, "1h", time.Hour, true},
		{MaxLag, "-1s", 0, false},
	} {
		got, err := c.d.Parse(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("%s=%q: %s, %v", c.d.Name, c.in, got, err)
		}
	}
	if err := ChunkTime.Check(0); err == nil || !strings.Contains(err.Error(), "--chunk-time must be 1ms to 1m") {
		t.Errorf("chunk-time 0: %v", err)
	}
}

// TestDefaultsValid: every default is in its own range.
func TestDefaultsValid(t *testing.T) {
	for _, d := range []Int{Threads, ApplyThreads, MaxChunkRows, CutOverAttempts} {
		if err := d.Check(d.Default); err != nil {
			t.Error(err)
		}
	}
	for _, d := range []Duration{ChunkTime, MaxLag, CheckpointInterval, CutOverLockTimeout, CutOverBudget, CriticalLoadGrace, ProgressInterval, ThrottleHTTPTimeout} {
		if err := d.Check(d.Default); err != nil {
			t.Error(err)
		}
	}
}

// TestLiveKeys: the keys the live control accepts are the ones the status
// endpoint and recast ctl advertise, and every live definition is one.
func TestLiveKeys(t *testing.T) {
	if !slices.Equal(LiveKeys, status.SettableKeys) {
		t.Errorf("settings.LiveKeys %v, status.SettableKeys %v", LiveKeys, status.SettableKeys)
	}
	for _, d := range []Int{Threads, ApplyThreads, MaxChunkRows, CutOverAttempts} {
		if d.Live != slices.Contains(LiveKeys, d.Name) {
			t.Errorf("%s: Live %v", d.Name, d.Live)
		}
	}
	for _, d := range []Duration{ChunkTime, MaxLag, CheckpointInterval} {
		if d.Live != slices.Contains(LiveKeys, d.Name) {
			t.Errorf("%s: Live %v", d.Name, d.Live)
		}
	}
	if Key(" Chunk-Size ") != "max-chunk-rows" || Key("THREADS") != "threads" {
		t.Error("Key does not normalise")
	}
}
