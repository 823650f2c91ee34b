package migration

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/check"
	"github.com/recast-osc/recast/internal/testutil"
	"github.com/recast-osc/recast/internal/workload"
)

// TestResumeAfterBulkUpdates: the application runs bulk UPDATEs of 2,000
// rows (each logged as many rows events) while recast copies and applies;
// recast is killed with SIGKILL at a random moment of the applier's work and
// resumed, three times in a row. The saved position is a transaction
// boundary, so the resumed stream starts cleanly (a position between two
// rows events of one statement fails with "invalid table id"), and the
// result equals the writers' shadow.
func TestResumeAfterBulkUpdates(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t, 5*time.Minute)
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	cfg := workload.Config{Schema: schema, Table: "wl", Writers: 4, Rows: 12000, Seed: 7, OpsPerSec: 200, BulkEvery: 100, BulkRows: 1000}
	sh, load := startLoad(ctx, t, db, cfg)
	o := testOptions(t, schema, "wl", "ADD COLUMN note INT NULL")
	o.CheckpointInterval = 200 * time.Millisecond
	// The killed runs cannot finish: their cut-over is postponed (the kill
	// then lands in the copy, or in the hold where the applier still works).
	flag := filepath.Join(t.TempDir(), "postpone")
	for round := range 3 {
		extra := []string{"--max-chunk-rows", "200", "--threads", "1", "--chunk-time", "20ms", "--checkpoint-interval", "200ms",
			"--postpone-cut-over-flag-file", flag}
		if round > 0 {
			extra = append(extra, "--resume")
		}
		k := startRecast(t, o, "", extra...)
		// Kill once two bulk UPDATEs ran during this run and a checkpoint
		// exists (the run streams them: the copy or the postponed hold).
		bulk0 := load.Stats().Bulk
		waitFor(ctx, t, k, func() bool { return load.Stats().Bulk >= bulk0+2 && checkpointExists(ctx, db) })
		time.Sleep(time.Duration(100+round*150) * time.Millisecond)
		k.kill(t)
		t.Logf("round %d: killed; load %s", round, load.Stats())
		waitLockFree(ctx, t, db, schema, "wl")
	}
	o.Resume = true
	res, err := runT(ctx, o)
	if err != nil {
		t.Fatalf("final resume: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	st := load.Stop()
	t.Logf("resumed: %d rows copied, %d changes applied; load %s", res.CopiedRows, res.Applied, st)
	if st.NoSuchTable != 0 || st.OtherErrors != 0 {
		t.Errorf("application errors: %s", st)
	}
	diff, err := workload.Verify(ctx, db, schema, "wl", sh, workload.VerifyOptions{MaxExamples: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !diff.OK() {
		t.Fatalf("after kills and resumes the table differs: %s", diff)
	}
}

func checkpointExists(ctx context.Context, db *sql.DB) bool {
	var n int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM _wl_chk").Scan(&n)
	return err == nil && n > 0
}

func waitFor(ctx context.Context, t *testing.T, k *killable, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case err := <-k.done:
			t.Fatalf("recast ended before the kill: %v\n%s", err, k.output())
		case <-ctx.Done():
			t.Fatalf("condition not reached: %v\n%s", ctx.Err(), k.output())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitLockFree waits until the server has noticed that the killed run's
// session is gone: its per-table lock is free again.
func waitLockFree(ctx context.Context, t *testing.T, db *sql.DB, schema, tbl string) {
	t.Helper()
	name := check.LockName(schema, tbl)
	for {
		var free sql.NullInt64
		if err := db.QueryRowContext(ctx, "SELECT IS_FREE_LOCK(?)", name).Scan(&free); err != nil {
			t.Fatal(err)
		}
		if free.Int64 == 1 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the killed run's lock %s is still held: %v", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
