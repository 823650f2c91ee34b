package checksum_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/checksum"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/flavor"
	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, 0)) }

// TestSnapshotAfterRetry: the pipeline's Align opens the source snapshot
// again when the binlog reader was already past the first one. The second
// snapshot must be a REPEATABLE READ snapshot too (recast's pool sessions
// are READ COMMITTED, and SET TRANSACTION covers only the next
// transaction): a change committed after it must not be seen by the
// comparison, or the checksum reports (and "repairs") a difference that
// is only the time between the two snapshots — what made
// TestRandomizedCollationKey see 63–126 differing rows now and then.
func TestSnapshotAfterRetry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	schema := testutil.NewSchema(t)
	raw := testutil.DB(t, schema)
	testutil.Exec(t, raw,
		"CREATE TABLE src (id INT NOT NULL PRIMARY KEY, v INT NOT NULL)",
		"INSERT INTO src SELECT seq, seq FROM seq_1_to_500",
		"CREATE TABLE ghost LIKE src",
		"INSERT INTO ghost SELECT * FROM src")
	sb := testutil.Sandbox(t)
	db, err := dbconn.Open(ctx, dbconn.Config{Host: sb.Primary.Host, Port: sb.Primary.Port, User: sb.User, Password: sb.Password, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	src, err := table.Load(ctx, db, schema, "src")
	if err != nil {
		t.Fatal(err)
	}
	gh, err := table.Load(ctx, db, schema, "ghost")
	if err != nil {
		t.Fatal(err)
	}
	bump := 0
	res, err := checksum.Run(ctx, db, checksum.Config{
		Source: src, Ghost: gh,
		SourceColumns: []string{"id", "v"}, GhostColumns: []string{"id", "v"},
		KeySource: []string{"id"}, KeyGhost: []string{"id"}, KeyIndex: "PRIMARY",
		ChunkRows: 1000, Rounds: 1, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Align: func(ctx context.Context, openSource func() (binlog.Position, error), openGhost func() error) error {
			for range 2 { // the reader was ahead: the snapshot is opened again
				if _, err := openSource(); err != nil {
					return err
				}
			}
			// Committed after the source snapshot, before the ghost's: the
			// applier would write it only after the ghost snapshot.
			bump++
			testutil.Exec(t, raw, "UPDATE src SET v = v + 1 WHERE id = 7")
			return openGhost()
		},
	})
	if err != nil {
		t.Fatalf("checksum: %v (%+v)", err, res)
	}
	if res.Repaired != 0 || res.Rounds != 1 || bump != 1 {
		t.Errorf("checksum saw a change committed after its source snapshot: %+v (%d aligns)", res, bump)
	}
	srv, err := flavor.Detect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var iso string
	if err := db.QueryRowContext(ctx, "SELECT @@SESSION."+srv.IsolationVar()).Scan(&iso); err != nil || iso != "READ-COMMITTED" {
		t.Errorf("the pool's sessions are %q (%v), want READ-COMMITTED (the test's premise)", iso, err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
