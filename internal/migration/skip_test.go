package migration

import (
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/testutil"
	"github.com/recast-osc/recast/internal/workload"
)

// TestSkipUncopiedUnderLoad: a lock-free copy into a table whose only unique
// key is the primary one leaves the application's changes to rows no chunk
// has read yet to the copy (docs/copy.md); under writers that insert above
// the copy's end, delete, move primary keys and run bulk UPDATEs, the
// migrated table equals the writers' shadow and the replica equals the
// primary. With another unique key in the new table nothing is left to the
// copy.
func TestSkipUncopiedUnderLoad(t *testing.T) {
	for _, c := range []struct {
		name, alter string
		skips       bool
	}{
		{"no-other-unique", "DROP INDEX uk_u, ADD INDEX u_plain (u), ADD COLUMN note INT NULL", true},
		{"unique-kept", "ADD COLUMN note INT NULL", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t, 4*time.Minute)
			schema := testutil.NewSchema(t)
			db := testutil.DB(t, schema)
			cfg := workload.Config{Schema: schema, Table: "wl", Writers: 4, Rows: 12000, Seed: 11, OpsPerSec: 1500, BulkEvery: 60, BulkRows: 300}
			sh, load := startLoad(ctx, t, db, cfg)
			time.Sleep(200 * time.Millisecond)
			o := testOptions(t, schema, "wl", c.alter)
			o.Threads = 2
			o.MaxChunkRows = 150 // many chunks: the writes meet rows on both sides of the copy
			res, err := runT(ctx, o)
			if err != nil {
				t.Fatalf("migrate: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
			st := load.Stop()
			t.Logf("%d rows copied, %d changes applied, %d left to the copy; load %s", res.CopiedRows, res.Applied, res.Skipped, st)
			if c.skips && res.Skipped == 0 {
				t.Errorf("no change was left to the copy")
			}
			if !c.skips && res.Skipped != 0 {
				t.Errorf("%d changes left to the copy with another unique key in the new table", res.Skipped)
			}
			// The checksum repairs what it finds different, which would hide a
			// change wrongly left to the copy from the comparison below.
			if res.Checksum.Repaired != 0 {
				t.Errorf("the checksum repaired %d chunk(s) before the cut-over", res.Checksum.Repaired)
			}
			if st.Committed == 0 || res.Applied == 0 || st.NoSuchTable != 0 || st.OtherErrors != 0 {
				t.Fatalf("load: %s, %d applied", st, res.Applied)
			}
			diff, err := workload.Verify(ctx, db, schema, "wl", sh, workload.VerifyOptions{MaxExamples: 5})
			if err != nil {
				t.Fatal(err)
			}
			if !diff.OK() {
				t.Fatalf("the migrated table differs from the writers' shadow: %s", diff)
			}
			testutil.WaitReplicaCaughtUp(t, 0)
			rdb := testutil.ReplicaDB(t, 0, schema)
			if got, want := testutil.TableChecksum(t, rdb, schema, "wl", "id"), testutil.TableChecksum(t, db, schema, "wl", "id"); got != want {
				t.Fatalf("replica differs from primary after the migration")
			}
		})
	}
}
