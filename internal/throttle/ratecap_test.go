package throttle

import (
	"testing"
	"time"
)

// TestRateCap: chunks are charged rows/rate from their start (or from the
// end of the time already granted), so the copy's threads together stay at
// the rate; time the copy did not use is not credited; SetRate starts
// afresh; no cap sleeps nothing.
func TestRateCap(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	r := NewRateCap(1000) // 1 row a millisecond

	// One thread: a 500-row chunk that took 10 ms has had 10 of its 500 ms.
	if d := r.PauseFor(500, ms(10), t0.Add(ms(10))); d != ms(490) {
		t.Errorf("first chunk: sleep %s, want 490ms", d)
	}
	// A second thread's chunk, started at the same time and ending now,
	// waits for the first's share and then its own.
	if d := r.PauseFor(500, ms(10), t0.Add(ms(10))); d != ms(990) {
		t.Errorf("second thread's chunk: sleep %s, want 990ms", d)
	}
	// The next chunk after both sleeps: granted until t0+1s, it starts then.
	if d := r.PauseFor(200, ms(5), t0.Add(ms(1005))); d != ms(195) {
		t.Errorf("third chunk: sleep %s, want 195ms", d)
	}
	// After a long hold (a throttle, the application idle), no credit: a
	// chunk is charged from its own start.
	late := t0.Add(time.Minute)
	if d := r.PauseFor(100, ms(20), late); d != ms(80) {
		t.Errorf("after a hold: sleep %s, want 80ms", d)
	}
	// A chunk slower than its share sleeps nothing.
	if d := r.PauseFor(10, ms(50), late.Add(ms(200))); d != 0 {
		t.Errorf("slow chunk: sleep %s, want 0", d)
	}
	// A new rate forgets what was granted: 100 rows at 100/s from the
	// chunk's start.
	r.PauseFor(100_000, 0, late.Add(ms(300))) // grants 100 s ahead
	r.SetRate(100)
	if d := r.PauseFor(100, ms(10), late.Add(ms(400))); d != ms(990) {
		t.Errorf("after SetRate: sleep %s, want 990ms", d)
	}
	if got := r.Rate(); got != 100 {
		t.Errorf("Rate() = %g, want 100", got)
	}
	r.SetRate(0)
	if d := r.PauseFor(100_000, 0, late.Add(ms(500))); d != 0 {
		t.Errorf("no cap: sleep %s", d)
	}
}

// TestRateCapThreads: many threads' chunks, each charged as it ends, keep
// the granted time at rows/rate whatever their interleaving.
func TestRateCapThreads(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	r := NewRateCap(2000)
	now := t0
	var rows int64
	var last time.Duration
	for i := range 40 {
		n := int64(100 + 37*i%400)
		rows += n
		// every chunk ends 1 ms after the one before (four threads that
		// keep ending chunks, as if they did not sleep)
		now = now.Add(time.Millisecond)
		last = r.PauseFor(n, time.Millisecond, now)
	}
	want := time.Duration(float64(rows)/2000*float64(time.Second)) - now.Sub(t0)
	if d := last - want; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("last sleep %s, want %s (%d rows at 2000/s from the first chunk's start)", last, want, rows)
	}
}
