//go:build stress

package migration

// The lock-duration target under load (≤ 100 ms per attempt at 500 ops/s
// with the replica-lag throttle active) is a timing figure: it holds on an
// otherwise idle machine and is run by make stress (a timed assertion in the
// default suite would measure the machine's load, not recast).

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/testutil"
	"github.com/recast-osc/recast/internal/workload"
)

// TestCutOverUnderLoadWithLagThrottle: 8 writers at 500 ops/s, a replica
// whose lag makes the throttle slow the applier (its SQL thread stopped
// after the catch-up, so the backlog grows through the checksum). The
// cut-over catches up again before each attempt, at full speed: every
// attempt holds the table at most 100 ms (LOCK TABLES request to UNLOCK),
// and no application statement waits longer than the lock timeout.
//
// Not parallel: it stops the shared replica's SQL thread.
func TestCutOverUnderLoadWithLagThrottle(t *testing.T) {
	ctx := ctxFor(t, 5*time.Minute)
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	rows := 50000
	if s := os.Getenv("RECAST_LAG_ROWS"); s != "" {
		rows, _ = strconv.Atoi(s)
	}
	cfg := workload.Config{Schema: schema, Table: "wl", Writers: 8, Rows: rows, Seed: 5, OpsPerSec: 500}
	if err := workload.CreateTable(ctx, db, cfg); err != nil {
		t.Fatal(err)
	}
	sh, err := workload.Prepare(ctx, db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitReplicaCaughtUp(t, 0)
	rdb := testutil.ReplicaDB(t, 0, "")
	t.Cleanup(func() {
		_, _ = rdb.Exec("START REPLICA SQL_THREAD")
		testutil.WaitReplicaCaughtUp(t, 0)
	})
	load := workload.Start(ctx, db, cfg, sh)
	stopped := false
	defer func() {
		if !stopped {
			load.Stop()
		}
	}()
	app := appDB(t, schema)
	probe := startLatencyProbe(app, "wl", 4, rows)

	o := testOptions(t, schema, "wl", "ADD COLUMN note INT NULL")
	o.MaxLag = time.Second
	o.CutOverLockTimeout = 2 * time.Second
	o.LoadMDLPlugin = true // as recommended: in-flight holders are waited for before the lock is requested
	ctl := NewControl()
	var delayed float64
	o.Pause = func(ctx context.Context, point string) {
		if point != "caught-up" {
			return
		}
		if _, err := rdb.Exec("STOP REPLICA SQL_THREAD"); err != nil {
			t.Error(err)
			return
		}
		// The throttle slows the applier (by 200 ms a window or more)
		// before the checksum starts.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if s := ctl.Status(); s.Apply.ApplierDelaySeconds >= 0.2 {
				delayed = s.Apply.ApplierDelaySeconds
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Error("the replica-lag throttle did not slow the applier")
	}
	res, err := ctl.Run(ctx, o.Options, o.Runtime)
	maxWait := probe.halt()
	st := load.Stop()
	stopped = true
	if err != nil {
		t.Fatal(err)
	}
	co := res.CutOver
	t.Logf("applier delay before the checksum %.2fs; checksum %s; cut-over: %d attempt(s), per attempt held %v, blocking %v, locked %s (lock wait %s, drain %s, under-lock verification %s, ghost rename %s, queue %s), application blocked %s in all; probe: %d reads, slowest %s; load %s",
		delayed, res.Checksum.Took.Round(time.Millisecond), co.Attempts, co.AttemptHolds, co.AttemptLocks, co.LockedFor.Round(time.Millisecond),
		co.LockWait.Round(time.Millisecond), co.Drain.Round(time.Millisecond), co.UnderLock.Round(time.Millisecond), co.Rename.Round(time.Millisecond), co.Queue.Round(time.Millisecond), co.Blocked.Round(time.Millisecond), probe.n.Load(), maxWait.Round(time.Millisecond), st)
	for i, d := range co.AttemptHolds {
		if d > 100*time.Millisecond {
			t.Errorf("attempt %d held the table locked %s (LOCK TABLES granted to UNLOCK), want ≤ 100ms", i+1, d)
		}
	}
	for i, d := range co.AttemptLocks {
		if d > o.CutOverLockTimeout {
			t.Errorf("attempt %d blocked the application %s (LOCK TABLES request to UNLOCK, or to the end of the RENAME), more than the lock timeout %s", i+1, d, o.CutOverLockTimeout)
		}
	}
	if maxWait > o.CutOverLockTimeout {
		t.Errorf("an application statement waited %s, more than the lock timeout %s", maxWait, o.CutOverLockTimeout)
	}
	if st.Failed() || probe.errs.Load() > 0 {
		t.Errorf("application errors: %s; probe errors %d", st, probe.errs.Load())
	}
	diff, err := workload.Verify(ctx, db, schema, "wl", sh, workload.VerifyOptions{MaxExamples: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !diff.OK() {
		t.Fatalf("the migrated table differs from the writers' shadow: %s", diff)
	}
}
