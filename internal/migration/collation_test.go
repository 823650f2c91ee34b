package migration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/testutil"
	"github.com/recast-osc/recast/internal/workload"
)

// collationAlters are the ALTERs TestRandomizedCollationKey runs; neither
// touches the key, so the chunk key and the applier's key stay u.
var collationAlters = []alterCase{
	{name: "force", alter: "FORCE"},
	{name: "add-column", alter: "ADD COLUMN note INT NULL"},
}

// TestRandomizedCollationKey is TestRandomizedCorrectness for a table whose
// primary key is a collation-sensitive string (u VARCHAR(64)
// utf8mb4_general_ci; workload.Config.KeyOnU): the writers change keys to
// values equal under the collation but different in bytes ('abc' -> 'ABC',
// 'abc' -> 'abc ', 'e' -> 'é'), alone, in multi-statement transactions, and
// around deletes and re-inserts of the "same" key, through the copy and the
// cut-over. Afterwards the table must equal the shadow byte for byte, and the
// plan must have used the single ordered apply queue.
//
// Apply threads 1, 4 and 16 and both ALTERs run in parallel subtests; copy
// threads (Options.Threads) 1 and 4 alternate so that every apply-threads
// and every ALTER value meets both.
//
// Environment: RECAST_COLLATION_SEEDS (default 1) repeats the whole set with
// other seeds; RECAST_COLLATION_RATE sets the writers' ops/s per subtest
// (default collationRate); RECAST_DEBUG_PROGRESS=1 logs recast's progress.
func TestRandomizedCollationKey(t *testing.T) {
	if s := os.Getenv("RECAST_COLLATION_RATE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RECAST_COLLATION_RATE=%q: want a positive number", s)
		}
		collationRate = n
	}
	rounds := 1
	if s := os.Getenv("RECAST_COLLATION_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RECAST_COLLATION_SEEDS=%q: want a positive number", s)
		}
		rounds = n
	}
	for round := range rounds {
		i := 0
		for _, applyThreads := range []int{1, 4, 16} {
			for _, c := range collationAlters {
				copyThreads := []int{1, 4}[(i+i/len(collationAlters))%2] // pairwise: (1,F,1) (1,A,4) (4,F,4) (4,A,1) (16,F,1) (16,A,4)
				seed := int64(1000 + round*100 + i)
				i++
				t.Run(fmt.Sprintf("seed%d-%s-apply%d-copy%d", seed, c.name, applyThreads, copyThreads), func(t *testing.T) {
					t.Parallel()
					runCollationKey(t, seed, c, applyThreads, copyThreads)
				})
			}
		}
	}
}

// collationRate is the writers' target rate (ops/s) in each subtest, as in
// TestRandomizedCorrectness. (With the first applier design, one ordered
// queue writing about one statement per key change, the catch-up did not
// converge above ~150 ops/s under -race; the single coalescing worker that
// replaced it writes two statements per window.)
var collationRate = 800

func runCollationKey(t *testing.T, seed int64, c alterCase, applyThreads, copyThreads int) {
	ctx := ctxFor(t, 3*time.Minute)
	start := time.Now()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	r := rand.New(rand.NewPCG(uint64(seed), 77))
	cfg := workload.Config{
		Schema: schema, Table: "wl", Writers: 4, Rows: 7500 + r.IntN(1000), Seed: seed,
		OpsPerSec: collationRate, ClientPrepared: seed%2 == 0, KeyOnU: true,
	}
	if err := workload.CreateTable(ctx, db, cfg); err != nil {
		t.Fatal(err)
	}
	sh, err := workload.Prepare(ctx, db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	prepared := time.Since(start)
	load := workload.Start(ctx, db, cfg, sh)
	stopped := false
	defer func() {
		if !stopped {
			load.Stop()
		}
	}()
	time.Sleep(300 * time.Millisecond) // changes before the copy starts too

	o := testOptions(t, schema, "wl", c.alter)
	o.ApplyThreads = applyThreads
	o.Threads = copyThreads
	o.MaxChunkRows = 100 + r.IntN(500) // many chunks, so writes interleave with the copy
	// Once caught up, keep the applier busy with key changes a little
	// longer before the checksum and the cut-over: the copy of a few
	// thousand rows takes about a second, and every window the applier
	// writes is a chance for a byte-keyed applier to go wrong.
	o.Pause = func(ctx context.Context, point string) {
		if point == "caught-up" {
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}
	if os.Getenv("RECAST_DEBUG_PROGRESS") != "" {
		o.ProgressInterval, o.Progress = 2*time.Second, testLogWriter{t}
	}
	migStart := time.Now()
	res, err := runT(ctx, o)
	migrated := time.Since(migStart)
	if err != nil {
		t.Fatalf("migrate %q: %v", c.alter, err)
	}
	time.Sleep(300 * time.Millisecond) // and after the cut-over
	st := load.Stop()
	stopped = true
	t.Logf("alter %q, %d rows, chunks of at most %d: prepared in %s, migrated in %s: %d rows copied, %d changes applied (%d rows written), cut-over %d attempt(s) locked %s; load %s",
		c.alter, cfg.Rows, o.MaxChunkRows, prepared.Round(time.Millisecond), migrated.Round(time.Millisecond),
		res.CopiedRows, res.Applied, res.AppliedRows, res.CutOver.Attempts, res.CutOver.LockedFor.Round(time.Millisecond), st)

	if res.Plan == nil || !res.Plan.Ordered {
		t.Errorf("the plan did not use the single ordered apply queue for a utf8mb4_general_ci key (plan %+v)", res.Plan)
	}
	if res.Plan != nil && strings.Join(res.Plan.KeySource, ",") != "u" {
		t.Errorf("chunk key is (%s), want (u)", strings.Join(res.Plan.KeySource, ", "))
	}
	// The checksum gate before the cut-over repairs what differs; in a run
	// where the applier is right there is nothing to repair.
	if res.Checksum.Repaired != 0 {
		t.Errorf("the checksum before the cut-over repaired %d chunk(s) (%+v): the applier diverged from the source", res.Checksum.Repaired, res.Checksum)
	}
	if st.Committed == 0 || res.Applied == 0 {
		t.Fatalf("no concurrent writes were exercised: %d committed, %d applied", st.Committed, res.Applied)
	}
	if st.CaseFlips == 0 || st.SpaceFlips == 0 || st.AccentFlips == 0 || st.Reinserts == 0 {
		t.Errorf("a kind of key change was never committed: %s", st)
	}
	if st.NoSuchTable != 0 || st.OtherErrors != 0 {
		t.Errorf("application errors during the migration: %s", st)
	}
	verifyStart := time.Now()
	diff, err := workload.Verify(ctx, db, schema, "wl", sh, workload.VerifyOptions{MaxExamples: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !diff.OK() {
		t.Fatalf("the migrated table differs from the expected content: %s; examples:\n%s", diff, strings.Join(diff.Examples, "\n"))
	}
	verified := time.Now()
	// The change must have reached the replica, which ends identical (byte
	// for byte: the checksum reads raw values).
	testutil.WaitReplicaCaughtUp(t, 0)
	rdb := testutil.ReplicaDB(t, 0, schema)
	if got, want := testutil.TableChecksum(t, rdb, schema, "wl", "id"), testutil.TableChecksum(t, db, schema, "wl", "id"); got != want {
		t.Fatalf("replica differs from primary after the migration: %s vs %s", got, want)
	}
	t.Logf("verified in %s, replica compared in %s", verified.Sub(verifyStart).Round(time.Millisecond), time.Since(verified).Round(time.Millisecond))
}
