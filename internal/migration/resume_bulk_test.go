package migration

import (
	"context"
	"database/sql"
	"testing"
	"time"

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
	if err := workload.CreateTable(ctx, db, cfg); err != nil {
		t.Fatal(err)
	}
	sh, err := workload.Prepare(ctx, db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	load := workload.Start(ctx, db, cfg, sh)
	stopped := false
	defer func() {
		if !stopped {
			load.Stop()
		}
	}()
	o := testOptions(t, schema, "wl", "ADD COLUMN note INT NULL")
	o.CheckpointInterval = 200 * time.Millisecond
	for round := range 3 {
		extra := []string{"--max-chunk-rows", "200", "--threads", "1", "--chunk-time", "20ms", "--checkpoint-interval", "200ms"}
		if round > 0 {
			extra = append(extra, "--resume")
		}
		k := startRecast(t, o, "", extra...)
		// Kill once the checkpoint has moved past at least one bulk UPDATE
		// applied by this run.
		bulk0 := load.Stats().Bulk
		waitFor(ctx, t, k, func() bool { return load.Stats().Bulk >= bulk0+1 && checkpointExists(ctx, db) })
		time.Sleep(time.Duration(100+round*150) * time.Millisecond)
		k.kill(t)
		t.Logf("round %d: killed; load %s", round, load.Stats())
	}
	o.Resume = true
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("final resume: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	st := load.Stop()
	stopped = true
	t.Logf("resumed: %d rows copied, %d changes applied; load %s", res.CopiedRows, res.Applied, st)
	if st.Bulk < 4 {
		t.Errorf("only %d bulk UPDATEs ran: the test did not exercise them", st.Bulk)
	}
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

func checkpointExists(ctx context.Context, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) bool {
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
