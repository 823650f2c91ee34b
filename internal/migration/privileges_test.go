package migration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/testutil"
)

// TestLeastPrivileges: a migration runs as an account holding exactly the
// privileges recast asks for (the GRANTs its privileges check prints),
// created in the test with the server's default authentication (MySQL:
// caching_sha2_password, over TCP without TLS, never logged in before: the
// binlog reader and every pool authenticate with the full exchange). The
// cut-over still names an idle transaction as a blocker (the metadata-lock
// tables are readable), and rows written during the copy arrive.
func TestLeastPrivileges(t *testing.T) {
	t.Parallel()
	schema, db := mdlTable(t)
	user := "least_" + schema[len(schema)-4:]
	const password = "Least-Pw-3qz"
	account := fmt.Sprintf("'%s'@'127.0.0.1'", user)
	testutil.Exec(t, db, "CREATE USER "+account+" IDENTIFIED BY '"+password+"'")
	t.Cleanup(func() { _, _ = db.Exec("DROP USER " + account) })
	srv := testutil.Server(t)
	testutil.Exec(t, db,
		"GRANT "+strings.Join(dbconn.GlobalPrivileges, ", ")+" ON *.* TO "+account,
		"GRANT "+strings.Join(dbconn.SchemaPrivileges, ", ")+" ON "+testutil.QuoteIdent(schema)+".* TO "+account)
	for _, s := range srv.ReadSchemas() {
		testutil.Exec(t, db, "GRANT SELECT ON "+testutil.QuoteIdent(s)+".* TO "+account)
	}

	o, lg := mdlOptions(t, schema, "MODIFY c BIGINT")
	o.Conn.User, o.Conn.Password = user, password
	o.LoadMDLPlugin = false
	idle := newClient(t, db)
	idle.exec(t, "BEGIN", "SELECT * FROM t WHERE id = 1")
	writer := newClient(t, db)
	writer.exec(t, "INSERT INTO t VALUES (100001, 1, 1)")
	done := make(chan error, 1)
	var res *Result
	go func() {
		var err error
		res, err = runT(ctxFor(t, 2*time.Minute), o)
		done <- err
	}()
	lg.waitLog(t, time.Minute, fmt.Sprintf("blocker.thread=%d", idle.id))
	writer.exec(t, "INSERT INTO t VALUES (100002, 2, 2)", "UPDATE t SET c = -c WHERE id <= 10", "DELETE FROM t WHERE id = 20")
	idle.exec(t, "COMMIT")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !hasBlocker(res.CutOver.Blockers, idle.id) {
		t.Errorf("the idle transaction was not named as a blocker: %+v", res.CutOver.Blockers)
	}
	var n, neg, gone int
	if err := db.QueryRow("SELECT COUNT(*), SUM(c < 0), SUM(id = 20) FROM t").Scan(&n, &neg, &gone); err != nil {
		t.Fatal(err)
	}
	if n != 2001 || neg != 10 || gone != 0 {
		t.Errorf("after the migration: %d rows, %d negated, id 20 present %d; want 2001, 10, 0", n, neg, gone)
	}
	var typ string
	if err := db.QueryRow("SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't' AND COLUMN_NAME = 'c'", schema).Scan(&typ); err != nil || typ != "bigint" {
		t.Errorf("column c is %q (%v), want bigint", typ, err)
	}
}
