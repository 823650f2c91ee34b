package testutil

import (
	"context"
	"os"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m, 1)) }

func TestSchemaName(t *testing.T) {
	long := strings.Repeat("TestVeryLong/Sub-Test name ", 10)
	for _, in := range []string{"TestX", "TestA/b c#d", "///", long} {
		got := schemaName(in, 12345)
		if len(got) > 64 {
			t.Errorf("schemaName(%q) = %q: %d chars", in, got, len(got))
		}
		for _, r := range got {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
				t.Errorf("schemaName(%q) = %q: bad char %q", in, got, r)
			}
		}
	}
	if a, b := schemaName("TestX", 1), schemaName("TestX", 1); a == b {
		t.Errorf("schema names not unique: %q", a)
	}
}

func TestChecksumAndReplica(t *testing.T) {
	schema := NewSchema(t)
	if !strings.HasPrefix(schema, "testchecksumandreplica_") {
		t.Errorf("schema %q not named after the test", schema)
	}
	db := DB(t, schema)

	var tz string
	if err := db.QueryRow("SELECT @@session.time_zone").Scan(&tz); err != nil || tz != "+00:00" {
		t.Fatalf("time_zone %q %v", tz, err)
	}

	Exec(t, db,
		"CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(20) NULL, d DATETIME(3))",
		"CREATE TABLE b LIKE a",
		"INSERT INTO a VALUES (1,'x','2024-01-02 03:04:05.123'),(2,NULL,NULL),(3,'','2000-01-01 00:00:00')",
		// same rows, inserted in another order
		"INSERT INTO b SELECT * FROM a ORDER BY id DESC",
	)
	ca := TableChecksum(t, db, schema, "a", "id")
	cb := TableChecksum(t, db, schema, "b", "")
	if ca != cb {
		t.Fatalf("equal tables differ: %s vs %s", ca, cb)
	}
	if !strings.HasPrefix(ca, "rows=3 ") {
		t.Fatalf("checksum %q", ca)
	}

	Exec(t, db, "UPDATE b SET v = 'y' WHERE id = 1")
	if cb2 := TableChecksum(t, db, schema, "b", "id"); cb2 == ca {
		t.Fatalf("changed row, same checksum %s", cb2)
	}
	// NULL vs empty string must differ.
	Exec(t, db, "UPDATE b SET v = 'x' WHERE id = 1", "UPDATE b SET v = '' WHERE id = 2")
	if cb3 := TableChecksum(t, db, schema, "b", "id"); cb3 == ca {
		t.Fatalf("NULL and '' hash the same")
	}
	Exec(t, db, "UPDATE b SET v = NULL WHERE id = 2")
	if cb4 := TableChecksum(t, db, schema, "b", "id"); cb4 != ca {
		t.Fatalf("restored table differs: %s vs %s", cb4, ca)
	}

	// No primary key: ordered by all columns.
	Exec(t, db, "CREATE TABLE c (x INT, y INT)", "INSERT INTO c VALUES (2,1),(1,2),(1,1)",
		"CREATE TABLE d (x INT, y INT)", "INSERT INTO d VALUES (1,1),(2,1),(1,2)")
	if c, d := TableChecksum(t, db, schema, "c", ""), TableChecksum(t, db, schema, "d", ""); c != d {
		t.Fatalf("keyless tables differ: %s vs %s", c, d)
	}

	// The replica gets everything.
	WaitReplicaCaughtUp(t, 0)
	rdb := ReplicaDB(t, 0, schema)
	if cr := TableChecksum(t, rdb, schema, "a", "id"); cr != ca {
		t.Fatalf("replica differs: %s vs %s", cr, ca)
	}
}

func TestScheduledEventsRun(t *testing.T) {
	schema := NewSchema(t)
	db := DB(t, schema)
	var on string
	if err := db.QueryRowContext(context.Background(), "SELECT @@event_scheduler").Scan(&on); err != nil || on != "ON" {
		t.Fatalf("event_scheduler %q %v", on, err)
	}
}
