package migration

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/recast-osc/recast/internal/workload"
)

// queryIDs returns the first column (an id) of every row of q.
func queryIDs(db *sql.DB, q string, args ...any) ([]int64, error) {
	rows, err := db.Query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// drain reads rows to the end and closes them.
func drain(rows *sql.Rows) error {
	defer rows.Close()
	for rows.Next() {
	}
	return errors.Join(rows.Err(), rows.Close())
}

// removeRecastBinary removes the directory recastBinary built the faultinject
// binary into (once per test binary, so it is removed from TestMain).
func removeRecastBinary() {
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
}

// startLoad creates the workload table of cfg, fills it and starts its
// writers; they are stopped when the test ends (Stop may be called earlier:
// it is idempotent and returns the counts).
func startLoad(ctx context.Context, t *testing.T, db *sql.DB, cfg workload.Config) (*workload.Shadow, *workload.Load) {
	t.Helper()
	if err := workload.CreateTable(ctx, db, cfg); err != nil {
		t.Fatal(err)
	}
	sh, err := workload.Prepare(ctx, db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	load := workload.Start(ctx, db, cfg, sh)
	t.Cleanup(func() { load.Stop() })
	return sh, load
}
