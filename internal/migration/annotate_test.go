package migration

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/testutil"
)

// TestApplierNotAnnotated: MariaDB writes each row-based statement's text
// into the binlog (binlog_annotate_row_events, on by default); the
// applier's multi-row REPLACEs are as long as their rows, so recast turns
// that off for its applier when it may. The application's own statements
// stay annotated (the control: annotation is on in this server).
func TestApplierNotAnnotated(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT NOT NULL)", "INSERT INTO t SELECT seq, 0 FROM seq_1_to_100")
	start, err := binlog.CurrentPosition(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	file, pos := start.File, int64(start.Offset)
	// MySQL logs statements beside rows (Rows_query events) only with
	// binlog_rows_query_log_events, OFF by default: on here, for the
	// sessions opened from now on (recast's applier's included).
	annotation, appDB := "Annotate_rows", db
	if testutil.Server(t).MySQL() {
		annotation = "Rows_query"
		testutil.Exec(t, db, "SET GLOBAL binlog_rows_query_log_events = ON")
		t.Cleanup(func() { testutil.Exec(t, db, "SET GLOBAL binlog_rows_query_log_events = OFF") })
		appDB = testutil.DB(t, schema)
	}
	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	o.Pause = func(ctx context.Context, point string) {
		if point == "ghost-created" { // after the stream's start position: applied
			testutil.Exec(t, appDB, "UPDATE t SET v = v + 7919 WHERE id <= 50", "DELETE FROM t WHERE id > 90")
		}
	}
	res, err := runT(ctxFor(t, time.Minute), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied == 0 {
		t.Fatal("the applier applied nothing: the test proves nothing")
	}
	var appAnnotated, applierAnnotated int
	rows, err := db.Query("SHOW BINLOG EVENTS IN '" + file + "' FROM " + strconv.FormatInt(pos, 10))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var log, typ, info string
		var p, sid, end int64
		if err := rows.Scan(&log, &p, &typ, &sid, &end, &info); err != nil {
			t.Fatal(err)
		}
		if typ != annotation {
			continue
		}
		switch {
		case strings.Contains(info, "UPDATE t SET v = v + 7919"):
			appAnnotated++
		case strings.Contains(info, "`"+schema+"`.`_t_new`") && !strings.Contains(info, "INSERT IGNORE"): // not the copier's
			applierAnnotated++
			t.Logf("annotated applier statement: %.200s", info)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if appAnnotated == 0 {
		t.Error("the application's UPDATE is not annotated: annotation is off in this server, the test proves nothing")
	}
	if applierAnnotated != 0 {
		t.Errorf("%d applier statement(s) annotated in the binlog", applierAnnotated)
	}
}
