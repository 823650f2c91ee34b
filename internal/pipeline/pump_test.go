package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/binlog"
)

// boundaryEv is a one-row insert that ends its transaction at offset off.
func boundaryEv(off uint32, id int64) binlog.Event {
	e := ev(off, ins(row(id, "v")))
	e.Boundary = true
	return e
}

// flushing runs p's flusher until the test ends.
func flushing(t *testing.T, p *Pump) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Flush(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Flush: %v", err)
		}
	})
}

// TestWindowWaitsUnlessAsked: with nothing waiting, changes wait for the
// window's time (here an hour: nothing is written); a WaitApplied caller gets
// them written at once, as one statement (a small window is one worker's);
// a full window is written without being asked, and so is every window of
// an eager applier (SetEager: the cut-over).
func TestWindowWaitsUnlessAsked(t *testing.T) {
	db, rec := fakeDB(t)
	cfg := testConfig()
	cfg.Workers = 4
	a := newApplier(t, db, cfg)
	p := &Pump{ap: a, windowTime: time.Hour}
	flushing(t, p)
	for i := range int64(30) {
		a.Add(boundaryEv(uint32(i+1), i))
	}
	time.Sleep(100 * time.Millisecond) // a window 5 ms apart would have been written by now
	if n := len(rec.all()); n != 0 {
		t.Fatalf("%d statements written before the window's time, with nothing waiting", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.WaitApplied(ctx, binlog.Position{File: "bin.000001", Offset: 30}); err != nil {
		t.Fatalf("WaitApplied did not get the window written: %v", err)
	}
	if n := len(rec.all()); n != 1 || rec.maxInFlight() != 1 {
		t.Errorf("a window of 30 rows was written in %d statements, %d at a time; want 1, by one worker", n, rec.maxInFlight())
	}

	db2, rec2 := fakeDB(t)
	cfg.WindowRows = 10
	a2 := newApplier(t, db2, cfg)
	flushing(t, &Pump{ap: a2, windowTime: time.Hour})
	for i := range int64(10) {
		a2.Add(boundaryEv(uint32(i+1), i))
	}
	waitWritten(t, rec2, 0, "a full window")

	db3, rec3 := fakeDB(t)
	cfg.WindowRows = 0
	a3 := newApplier(t, db3, cfg)
	flushing(t, &Pump{ap: a3, windowTime: time.Hour})
	a3.SetEager()
	for i := range int64(3) {
		n := len(rec3.all())
		a3.Add(boundaryEv(uint32(i+1), i))
		waitWritten(t, rec3, n, "an eager applier's window")
	}
}

// waitWritten waits until rec has more than n statements.
func waitWritten(t *testing.T, rec *recorder, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(rec.all()) == n {
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWindowCadence: changes arriving every millisecond for 600 ms are
// written in windows WindowTime apart, not one every few milliseconds.
func TestWindowCadence(t *testing.T) {
	db, rec := fakeDB(t)
	cfg := testConfig()
	cfg.Workers = 4
	a := newApplier(t, db, cfg)
	p := &Pump{ap: a, windowTime: WindowTime}
	flushing(t, p)
	start := time.Now()
	var i int64
	for time.Since(start) < 600*time.Millisecond {
		a.Add(boundaryEv(uint32(i+1), i))
		i++
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.WaitApplied(ctx, binlog.Position{File: "bin.000001", Offset: uint32(i)}); err != nil {
		t.Fatal(err)
	}
	windows := len(rec.all()) // each window is under minOpsPerWorker rows: one statement
	most := int(time.Since(start)/WindowTime) + 2
	if windows < 2 || windows > most {
		t.Errorf("%d rows over %s were written in %d statements; want 2..%d (windows %s apart)", i, time.Since(start).Round(time.Millisecond), windows, most, WindowTime)
	}
}

// TestWorkersFor: a window is split over more workers only when each gets
// minOpsPerWorker operations.
func TestWorkersFor(t *testing.T) {
	db, rec := fakeDB(t)
	cfg := testConfig()
	cfg.Workers = 4
	a := newApplier(t, db, cfg)
	for n, want := range map[int]int{0: 1, 1: 1, 99: 1, 199: 1, 200: 2, 399: 3, 400: 4, 5000: 4} {
		if got := a.workersFor(n); got != want {
			t.Errorf("workersFor(%d) = %d, want %d", n, got, want)
		}
	}
	rec.delay = 5 * time.Millisecond
	for i := range int64(400) {
		a.Add(boundaryEv(uint32(i+1), i))
	}
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.all()); n != 4 || rec.maxInFlight() < 2 {
		t.Errorf("400 rows over 4 workers: %d statements, at most %d at a time; want 4, in parallel", n, rec.maxInFlight())
	}
}

// TestWindowUnderThrottleDelay: while the throttle delays the applier, a
// window is due the delay after the last one, not the window's time (here an
// hour), as before windows had a time of their own.
func TestWindowUnderThrottleDelay(t *testing.T) {
	db, rec := fakeDB(t)
	a := newApplier(t, db, testConfig())
	flushing(t, &Pump{ap: a, windowTime: time.Hour, delay: func() time.Duration { return 2 * time.Millisecond }})
	for i := range int64(3) {
		n := len(rec.all())
		a.Add(boundaryEv(uint32(i+1), i))
		waitWritten(t, rec, n, "a delayed applier's window")
	}
}
