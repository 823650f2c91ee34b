package migration

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/cutover"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/testutil"
)

// TestCutOverOneDeadline: from the LOCK TABLES request to UNLOCK an attempt
// gets --cut-over-lock-timeout in all. A slow drain plus a slow UnderLock
// (each within the timeout alone), or a session holding the ghost's
// metadata lock after a slow drain, make the attempt fail at the deadline:
// no application statement waits longer than the timeout (plus the
// UNLOCK), and the next attempt swaps.
func TestCutOverOneDeadline(t *testing.T) {
	for _, c := range []struct {
		name        string
		slowDrain   time.Duration
		slowUnder   time.Duration
		ghostHolder bool
	}{
		{name: "drain-then-under-lock", slowDrain: 1200 * time.Millisecond, slowUnder: 1500 * time.Millisecond},
		{name: "drain-then-ghost-held", slowDrain: 1200 * time.Millisecond, ghostHolder: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxFor(t, 2*time.Minute)
			schema, adm := swapFixture(t)
			o := testOptions(t, schema, "t", "")
			cc := o.Conn
			cc.Schema = schema
			db, err := dbconn.Open(ctx, cc)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var holder *sql.Conn
			if c.ghostHolder {
				holder, err = adm.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer holder.Close()
				testutil.Exec(t, adm, "SELECT 1") // the pool works
				for _, s := range []string{"BEGIN", "SELECT COUNT(*) FROM _t_new"} {
					if _, err := holder.ExecContext(ctx, s); err != nil {
						t.Fatal(err)
					}
				}
			}
			app := appDB(t, schema)
			probe := startLatencyProbe(app, "t", 4, 100)
			var attempt atomic.Int32
			const timeout = 2 * time.Second
			res, err := cutover.Run(ctx, db, cutover.Config{
				Schema: schema, Table: "t", Ghost: "_t_new", Old: "_t_old", LockWaitTimeout: timeout, Attempts: 3,
				WaitApplied: func(ctx context.Context, _ binlog.Position) error {
					if attempt.Add(1) == 1 {
						select {
						case <-time.After(c.slowDrain):
						case <-ctx.Done():
							return ctx.Err()
						}
					}
					return nil
				},
				UnderLock: func(ctx context.Context, _ *sql.Conn) error {
					if attempt.Load() == 1 && c.slowUnder > 0 {
						select {
						case <-time.After(c.slowUnder):
						case <-ctx.Done():
							return errors.Join(cutover.ErrRetry, ctx.Err())
						}
					}
					return nil
				},
				Armed: func() {}, Disarmed: func() {}, Logger: o.Logger,
				Pause: func(ctx context.Context, point string) {
					if point == "before-lock" && attempt.Load() == 1 && holder != nil {
						_, _ = holder.ExecContext(ctx, "COMMIT") // the holder is gone for the second attempt
					}
				},
			})
			maxWait := probe.halt()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("attempts %d, per attempt %v, blocked %s in all; slowest application read %s", res.Attempts, res.AttemptLocks, res.Blocked, maxWait)
			if res.Attempts != 2 || len(res.AttemptLocks) != 2 {
				t.Errorf("attempts %d (%v): want the first to fail at its deadline and the second to swap", res.Attempts, res.AttemptLocks)
			}
			const slack = 300 * time.Millisecond // the UNLOCK and the kill's round trip
			for i, d := range res.AttemptLocks {
				if d > timeout+slack {
					t.Errorf("attempt %d held the table %s, over the lock timeout %s", i+1, d, timeout)
				}
			}
			if maxWait > timeout+slack {
				t.Errorf("an application statement waited %s, over the lock timeout %s", maxWait, timeout)
			}
			if !hasColumn(t, adm, schema, "t", "note") {
				t.Errorf("not swapped: %v", tableNames(t, adm, schema))
			}
		})
	}
}

// TestAbortAfterSwapNotReported: an abort that arrives once the RENAME can
// run (the sentry dropped) is too late: the migration reports the swap, not
// "aborted", and the table is the new one.
func TestAbortAfterSwapNotReported(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t SELECT seq, seq FROM seq_1_to_1000")
	o := testOptions(t, schema, "t", "ADD COLUMN note INT NULL")
	ctl := NewControl()
	o.Pause = func(ctx context.Context, point string) {
		if point == "cutover:sentry-dropped" {
			if err := ctl.Abort("operator abort, too late"); err != nil {
				t.Error(err)
			}
		}
	}
	res, err := ctl.Run(ctx, o.Options, o.Runtime)
	if err != nil && (errors.Is(err, ErrAborted) || strings.Contains(err.Error(), "abort")) {
		t.Fatalf("the table was swapped, yet the run reports: %v", err)
	}
	if !hasColumn(t, db, schema, "t", "note") {
		t.Fatalf("not swapped: %v (err %v)", tableNames(t, db, schema), err)
	}
	t.Logf("result: err %v, cut-over %+v", err, res.CutOver)
}
