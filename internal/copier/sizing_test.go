package copier

import (
	"context"
	"reflect"
	"testing"
	"time"
)

func newTest(t *testing.T, cfg Config) *Copier {
	t.Helper()
	if cfg.SourceColumns == nil {
		cfg.KeyColumns = []string{"id"}
		cfg.SourceColumns = []string{"id", "a"}
		cfg.GhostColumns = []string{"id", "a"}
	}
	c, err := New(nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewValidates(t *testing.T) {
	for i, cfg := range []Config{
		{},
		{KeyColumns: []string{"id"}},
		{KeyColumns: []string{"id"}, SourceColumns: []string{"a"}, GhostColumns: []string{"a", "b"}},
		{SourceColumns: []string{"a"}, GhostColumns: []string{"a"}},
	} {
		if _, err := New(nil, cfg); err == nil {
			t.Errorf("case %d: New accepted %+v", i, cfg)
		}
	}
}

func TestNewDefaults(t *testing.T) {
	c := newTest(t, Config{})
	threads, ct, lo, hi := c.Settings()
	if threads != 1 || ct != 200*time.Millisecond || lo != 100 || hi != 5000 {
		t.Errorf("defaults: threads %d chunk time %v bounds %d..%d", threads, ct, lo, hi)
	}
	if got := c.Progress().ChunkSize; got != 1000 {
		t.Errorf("first chunk %d rows, want 1000", got)
	}
	// The first chunk never exceeds the cap; threads are capped at MaxThreads.
	c = newTest(t, Config{MaxChunk: 300, Threads: 1000})
	if got := c.Progress().ChunkSize; got != 300 {
		t.Errorf("first chunk %d rows with MaxChunk 300", got)
	}
	if threads, _, _, _ := c.Settings(); threads != MaxThreads {
		t.Errorf("threads %d, want MaxThreads %d", threads, MaxThreads)
	}
}

// TestAdjust: the next chunk is sized so that it takes ChunkTime at the rate
// the last one ran, changing by at most 2× either way per chunk, within the
// bounds.
func TestAdjust(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name       string
		size       int64
		took       time.Duration
		lo, hi     int
		chunkTime  time.Duration
		wantResize int64
	}{
		{"on target", 1000, 200 * ms, 100, 5000, 200 * ms, 1000},
		{"twice too slow halves", 1000, 400 * ms, 100, 5000, 200 * ms, 500},
		{"ten times too slow still halves", 1000, 2 * time.Second, 100, 5000, 200 * ms, 500},
		{"twice too fast doubles", 1000, 100 * ms, 100, 5000, 200 * ms, 2000},
		{"instant doubles", 1000, 0, 100, 5000, 200 * ms, 2000},
		{"proportional in between", 1000, 160 * ms, 100, 5000, 200 * ms, 1250},
		{"capped at max", 4000, 10 * ms, 100, 5000, 200 * ms, 5000},
		{"floored at min", 150, 10 * time.Second, 100, 5000, 200 * ms, 100},
		{"min 1 row", 1, time.Hour, 1, 5000, 200 * ms, 1},
		{"longer target grows", 1000, 200 * ms, 100, 5000, 300 * ms, 1500},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTest(t, Config{MinChunk: tc.lo, MaxChunk: tc.hi, ChunkTime: tc.chunkTime})
			c.chunk.Store(tc.size)
			c.adjust(tc.took)
			if got := c.Progress().ChunkSize; got != tc.wantResize {
				t.Errorf("chunk %d after %v: next %d, want %d", tc.size, tc.took, got, tc.wantResize)
			}
		})
	}
}

// TestAdjustConverges: a steady per-row cost leads to the chunk size that
// takes the target time.
func TestAdjustConverges(t *testing.T) {
	c := newTest(t, Config{ChunkTime: 100 * time.Millisecond, MinChunk: 10, MaxChunk: 100000})
	perRow := 50 * time.Microsecond // 100 ms = 2000 rows
	for range 30 {
		c.adjust(time.Duration(c.Progress().ChunkSize) * perRow)
	}
	if got := c.Progress().ChunkSize; got < 1990 || got > 2010 {
		t.Errorf("converged to %d rows, want about 2000", got)
	}
}

func TestSetChunkBoundsAndTime(t *testing.T) {
	c := newTest(t, Config{})
	c.SetChunkBounds(10, 200) // the current 1000 is clamped at once
	if got := c.Progress().ChunkSize; got != 200 {
		t.Errorf("chunk %d after bounds 10..200", got)
	}
	c.SetChunkBounds(5000, 8000)
	if got := c.Progress().ChunkSize; got != 5000 {
		t.Errorf("chunk %d after bounds 5000..8000", got)
	}
	c.SetChunkBounds(900, 300) // min above max: min follows max
	if _, _, lo, hi := c.Settings(); lo != 300 || hi != 300 {
		t.Errorf("bounds 900..300 became %d..%d", lo, hi)
	}
	c.SetChunkBounds(-4, 0) // nonsense: at least one row
	if _, _, lo, hi := c.Settings(); lo != 1 || hi != 1 {
		t.Errorf("bounds -4..0 became %d..%d", lo, hi)
	}
	c.SetChunkTime(0) // ignored
	c.SetChunkTime(-time.Second)
	if _, ct, _, _ := c.Settings(); ct != 200*time.Millisecond {
		t.Errorf("non-positive chunk time changed it to %v", ct)
	}
	c.SetChunkTime(time.Second)
	if _, ct, _, _ := c.Settings(); ct != time.Second {
		t.Errorf("chunk time %v", ct)
	}

	// The chunk size follows the chunk time, within the bounds.
	c = newTest(t, Config{}) // 1,000 rows for 200 ms
	c.SetChunkTime(10 * time.Millisecond)
	if got := c.Progress().ChunkSize; got != 100 {
		t.Errorf("chunk %d after 200 ms -> 10 ms from 1000 rows, want 100 (1000/20 = 50, the minimum)", got)
	}
	c.SetChunkBounds(10, 5000)
	c.chunk.Store(300)
	c.SetChunkTime(20 * time.Millisecond)
	if got := c.Progress().ChunkSize; got != 600 {
		t.Errorf("chunk %d after 10 ms -> 20 ms from 300 rows, want 600", got)
	}
	c.SetChunkTime(time.Second)
	if got := c.Progress().ChunkSize; got != 5000 {
		t.Errorf("chunk %d after 20 ms -> 1 s from 600 rows, want 5000 (the maximum)", got)
	}
	c.SetChunkTime(time.Second) // unchanged: the size too
	if got := c.Progress().ChunkSize; got != 5000 {
		t.Errorf("chunk %d after setting the same chunk time", got)
	}
}

// TestWatermark: chunks finishing out of order advance the watermark only
// over a gapless prefix.
func TestWatermark(t *testing.T) {
	start := []any{"5"}
	c := newTest(t, Config{Start: start})
	if wm, done := c.Watermark(); !reflect.DeepEqual(wm, start) || done {
		t.Fatalf("initial watermark %v done %v, want the resume key", wm, done)
	}
	key := func(s string) []any { return []any{s} }
	steps := []struct {
		seq  int
		hi   string
		want []any
	}{
		{2, "30", start}, // 0 and 1 not finished
		{0, "10", key("10")},
		{3, "40", key("10")},
		{1, "20", key("40")}, // closes the gap: 1, 2, 3 absorbed at once
		{4, "50", key("50")},
	}
	for _, s := range steps {
		c.finish(chunk{seq: s.seq, hi: key(s.hi)})
		if wm, _ := c.Watermark(); !reflect.DeepEqual(wm, s.want) {
			t.Errorf("after chunk %d: watermark %v, want %v", s.seq, wm, s.want)
		}
	}
	if len(c.finished) != 0 {
		t.Errorf("%d finished chunks not absorbed", len(c.finished))
	}
}

// TestAwait: workers at or above the thread count wait until SetThreads
// raises it, the walk ends, or the context ends.
func TestAwait(t *testing.T) {
	c := newTest(t, Config{Threads: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	walked := make(chan struct{})
	if !c.await(ctx, 1, walked) {
		t.Fatal("worker 1 of 2 waits")
	}
	res := make(chan bool)
	go func() { res <- c.await(ctx, 3, walked) }()
	select {
	case r := <-res:
		t.Fatalf("worker 3 of 2 returned %v", r)
	case <-time.After(20 * time.Millisecond):
	}
	c.SetThreads(3) // still below
	select {
	case r := <-res:
		t.Fatalf("worker 3 of 3 returned %v", r)
	case <-time.After(20 * time.Millisecond):
	}
	c.SetThreads(4)
	if r := <-res; !r {
		t.Error("worker 3 of 4 not released to work")
	}

	go func() { res <- c.await(ctx, 10, walked) }()
	close(walked)
	if r := <-res; r {
		t.Error("waiting worker released to work after the walk ended")
	}
	walked = make(chan struct{})
	go func() { res <- c.await(ctx, 10, walked) }()
	cancel()
	if r := <-res; r {
		t.Error("waiting worker released to work after cancel")
	}
	c.SetThreads(0)
	if threads, _, _, _ := c.Settings(); threads != 1 {
		t.Errorf("SetThreads(0) gave %d threads", threads)
	}
	c.SetThreads(MaxThreads + 1)
	if threads, _, _, _ := c.Settings(); threads != MaxThreads {
		t.Errorf("SetThreads(MaxThreads+1) gave %d threads", threads)
	}
}
