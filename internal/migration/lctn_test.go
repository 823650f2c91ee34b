package migration

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/testutil"
)

// TestLowerCaseTableNames: on a server with lower_case_table_names=1 the
// schema and the table are named in mixed case on the command line. The
// server folds them (Shop.Orders is shop.orders) and so does its binary
// log; the stream matches events by name, so the changes made during the
// migration (during the copy and after the checksum, just before the
// cut-over) must reach the new table all the same.
func TestLowerCaseTableNames(t *testing.T) {
	t.Parallel()
	sb := testutil.ExtraSandbox(t, 0, "--lower-case-table-names=1")
	admin, err := sql.Open("mysql", sb.DSN(sb.Primary, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	testutil.Exec(t, admin,
		"CREATE DATABASE Shop",
		"CREATE TABLE Shop.Orders (id INT NOT NULL PRIMARY KEY, v INT NOT NULL)",
		"INSERT INTO Shop.Orders SELECT seq, seq FROM shop.seq_1_to_3000")
	ctx := ctxFor(t, 3*time.Minute)
	o := testOptions(t, "Shop", "Orders", "ADD COLUMN note INT NULL")
	o.Conn = dbconn.Config{Host: sb.Primary.Host, Port: sb.Primary.Port, User: sb.User, Password: sb.Password}
	o.MaxChunkRows = 100
	o.DropOldTable = true
	n := 0
	o.Pause = func(ctx context.Context, point string) {
		switch point {
		case "copy-done", "cutover:before-lock":
			n++
			testutil.Exec(t, admin,
				fmt.Sprintf("INSERT INTO Shop.Orders VALUES (%d, 1)", 10000+n),
				fmt.Sprintf("UPDATE Shop.Orders SET v = -ABS(v) WHERE id <= %d", 100*n),
				fmt.Sprintf("DELETE FROM Shop.Orders WHERE id = %d", 2000+n))
		}
	}
	if _, err := runT(ctx, o); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("the migration passed %d of the 2 points where the test writes", n)
	}
	var rows, neg, sum int64
	if err := admin.QueryRow("SELECT COUNT(*), SUM(v < 0), SUM(id) FROM shop.orders WHERE note IS NULL").Scan(&rows, &neg, &sum); err != nil {
		t.Fatal(err)
	}
	// 3,000 rows, 2 inserted (10001, 10002), 2 deleted (2001, 2002); ids 1-200 negated.
	if want := int64(3000*3001/2 + 10001 + 10002 - 2001 - 2002); rows != 3000 || neg != 200 || sum != want {
		t.Fatalf("the new table: %d rows, %d negated, id sum %d; want 3000, 200, %d", rows, neg, sum, want)
	}
}
