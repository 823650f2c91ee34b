package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/check"
	"github.com/recast-osc/recast/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.NoLeaks(testutil.Main(m, 0))) }

// The account the CLI tests connect as: a distinctive password, so that the
// tests can assert it never appears in recast's output.
const (
	cliUser     = "cli_user"
	cliPassword = "Pw-7xQ-never-print-9z"
)

var (
	accountMu      sync.Mutex
	accountCreated bool
)

func cliAccount(t *testing.T, db *sql.DB) {
	t.Helper()
	accountMu.Lock()
	defer accountMu.Unlock()
	if accountCreated {
		return
	}
	testutil.Exec(t, db,
		fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'127.0.0.1' IDENTIFIED BY '%s'", cliUser, cliPassword),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO '%s'@'127.0.0.1'", cliUser))
	accountCreated = true
}

// cliCase is one way recast migrate must fail.
type cliCase struct {
	name  string
	setup []string // SQL in the test's schema, after table t with 2000 rows
	table string   // --table (default t)
	alter string   // --alter (default FORCE)
	// flags replaces connection flags or adds flags.
	flags func(t *testing.T, schema string, db *sql.DB) []string
	// secret must not appear in the output (default cliPassword).
	secret   string
	exit     int // default 1
	keywords []string
	mariadb  bool // a MariaDB feature (skipped on MySQL)
}

func (c cliCase) run(t *testing.T) {
	if c.mariadb && testutil.Server(t).MySQL() {
		t.Skip("a MariaDB feature")
	}
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	cliAccount(t, db)
	testutil.Exec(t, db,
		"CREATE TABLE t (id INT NOT NULL PRIMARY KEY, a VARCHAR(100) NOT NULL, b INT NULL, c VARCHAR(100) NULL)",
		"INSERT INTO t SELECT seq, CONCAT('v', seq), IF(seq % 10 = 0, NULL, seq % 7), REPEAT('x', seq % 20) FROM seq_1_to_2000")
	testutil.Exec(t, db, c.setup...)
	before := snapshot(t, db, schema)

	sb := testutil.Sandbox(t)
	tbl, alter := c.table, c.alter
	if tbl == "" {
		tbl = "t"
	}
	if alter == "" {
		alter = "FORCE"
	}
	args := []string{"migrate", "--host", sb.Primary.Host, "--port", strconv.Itoa(sb.Primary.Port),
		"--user", cliUser, "--password", cliPassword, "--database", schema, "--table", tbl, "--alter", alter,
		"--execute", "--progress-interval", "0"}
	if c.flags != nil {
		args = append(args, c.flags(t, schema, db)...) // later flags win
	}
	code, out := runCLI(t, args...)
	want := c.exit
	if want == 0 {
		want = 1
	}
	if code != want {
		t.Errorf("exit code %d, want %d; output:\n%s", code, want, out)
	}
	t.Logf("output: %s", out)
	for _, k := range c.keywords {
		if !strings.Contains(out, k) {
			t.Errorf("output lacks %q:\n%s", k, out)
		}
	}
	secret := c.secret
	if secret == "" {
		secret = cliPassword
	}
	if strings.Contains(out, secret) {
		t.Errorf("the password appears in the output:\n%s", out)
	}
	for _, bad := range []string{"goroutine ", "panic", ".go:"} {
		if strings.Contains(out, bad) {
			t.Errorf("output holds %q (a stack trace?):\n%s", bad, out)
		}
	}
	if want == 1 {
		last := lastLine(out)
		if !strings.HasPrefix(last, "recast: ") || !strings.Contains(strings.ToLower(last), "fix") {
			t.Errorf("the last line does not name the cause and the fix: %q", last)
		}
	}
	if after := snapshot(t, db, schema); after != before {
		t.Errorf("the schema changed:\nbefore %s\nafter  %s", before, after)
	}
}

func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return code, stdout.String() + stderr.String()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// snapshot lists the schema's tables with the checksum and row count of
// every base table: a failed run must leave all of it as it was (no helper
// table left, no row changed).
func snapshot(t *testing.T, db *sql.DB, schema string) string {
	t.Helper()
	rows, err := db.Query(`SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME`, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type tb struct{ name, typ string }
	var tbs []tb
	for rows.Next() {
		var x tb
		if err := rows.Scan(&x.name, &x.typ); err != nil {
			t.Fatal(err)
		}
		tbs = append(tbs, x)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, x := range tbs {
		fmt.Fprintf(&b, "%s(%s", x.name, x.typ)
		if x.typ == "BASE TABLE" || x.typ == "SYSTEM VERSIONED" {
			b.WriteString(" " + testutil.TableChecksum(t, db, schema, x.name, ""))
		}
		b.WriteString(") ")
	}
	return b.String()
}

// limitedUser creates an account with the given grants (%s is the schema)
// and returns the flags to connect as it.
func limitedUser(user, password string, grants ...string) func(t *testing.T, schema string, db *sql.DB) []string {
	return func(t *testing.T, schema string, db *sql.DB) []string {
		user := user + "_" + schema[len(schema)-4:]
		testutil.Exec(t, db, fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'", user, password))
		t.Cleanup(func() { db.Exec(fmt.Sprintf("DROP USER '%s'@'127.0.0.1'", user)) })
		for _, g := range grants {
			if strings.Contains(g, "%s") {
				g = fmt.Sprintf(g, schema)
			}
			testutil.Exec(t, db, g+fmt.Sprintf(" TO '%s'@'127.0.0.1'", user))
		}
		return []string{"--user", user, "--password", password}
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestMigrateRefuses: every way recast migrate can be refused before it
// creates anything ends with exit code 1, one line naming the cause and
// the fix, no password in the output, and the schema as it was. The data
// checks that only the copy finds (a value the new column cannot hold) end
// the same way, after the ghost table is dropped.
func TestMigrateRefuses(t *testing.T) {
	for _, c := range []cliCase{
		// Connecting.
		{name: "wrong password", flags: func(*testing.T, string, *sql.DB) []string {
			return []string{"--password", "Wrong-Pw-3kx-secret"}
		}, secret: "Wrong-Pw-3kx-secret", keywords: []string{"access denied: wrong user or password", "check --user and --password"}},
		{name: "unknown host", flags: func(*testing.T, string, *sql.DB) []string {
			return []string{"--host", "nonexistent.invalid"}
		}, keywords: []string{`unknown host "nonexistent.invalid"`, "does not resolve", "check --host"}},
		{name: "closed port", flags: func(t *testing.T, _ string, _ *sql.DB) []string {
			return []string{"--port", strconv.Itoa(freePort(t))}
		}, keywords: []string{"connection refused", "check --host and --port"}},
		{name: "unknown database", flags: func(*testing.T, string, *sql.DB) []string {
			return []string{"--database", "no_such_database_x"}
		}, keywords: []string{"the database does not exist", "no_such_database_x", "check --database"}},
		{name: "no access to the database", flags: limitedUser("noacc", "NoAcc-Pw-5tz", "GRANT REPLICATION SLAVE ON *.*"),
			secret: "NoAcc-Pw-5tz", keywords: []string{"access denied to the database", "GRANT SELECT, INSERT, DELETE, CREATE, DROP, ALTER, LOCK TABLES, CREATE TEMPORARY TABLES ON `"}},
		{name: "missing privileges", flags: limitedUser("few", "Few-Pw-8hw", "GRANT SELECT, INSERT, DELETE, CREATE, DROP ON `%s`.*"),
			secret: "Few-Pw-8hw", keywords: []string{"lacks privileges recast needs", "GRANT REPLICATION SLAVE, REPLICATION CLIENT, PROCESS ON *.* TO 'few_",
				"GRANT ALTER, LOCK TABLES, CREATE TEMPORARY TABLES ON `"}},
		// The table.
		{name: "table missing", table: "nosuch", keywords: []string{"nosuch` does not exist", "check --database and --table"}},
		{name: "view", setup: []string{"CREATE VIEW v AS SELECT id, a FROM t"}, table: "v", keywords: []string{"is a view", "base table"}},
		{name: "not innodb", setup: []string{"CREATE TABLE m (id INT PRIMARY KEY) ENGINE=MyISAM", "INSERT INTO m VALUES (1)"}, table: "m",
			keywords: []string{"uses the MyISAM engine", "ENGINE=InnoDB"}},
		{name: "system-versioned", mariadb: true, setup: []string{"CREATE TABLE sv (id INT PRIMARY KEY, x INT) WITH SYSTEM VERSIONING", "INSERT INTO sv VALUES (1, 1)", "UPDATE sv SET x = 2"},
			table: "sv", alter: "ADD COLUMN y INT, ALGORITHM=COPY", keywords: []string{"is system-versioned", "history"}},
		{name: "no usable key", setup: []string{"CREATE TABLE nk (a INT, b INT, UNIQUE KEY (a))", "INSERT INTO nk VALUES (1, 1), (NULL, 2)"}, table: "nk",
			keywords: []string{"no usable key", "PRIMARY KEY or a UNIQUE key on NOT NULL columns"}},
		// The ALTER.
		{name: "syntax error", alter: "ADD COLUMN x INTT", keywords: []string{"could not be analysed: syntax error at line 1, column 14"}},
		{name: "rename to", alter: "RENAME TO t2", keywords: []string{"RENAME TO", "RENAME TABLE"}},
		{name: "partitions", alter: "ADD PARTITION (PARTITION p2 VALUES LESS THAN (100))", keywords: []string{"partition management"}},
		{name: "tablespace", alter: "DISCARD TABLESPACE", keywords: []string{"DISCARD/IMPORT TABLESPACE"}},
		{name: "several statements", alter: "ADD COLUMN x INT; DROP TABLE t", keywords: []string{"several statements"}},
		{name: "another table", setup: []string{"CREATE TABLE u (id INT PRIMARY KEY)"}, alter: "ALTER TABLE u ADD COLUMN x INT", keywords: []string{"ALTER of `u`", "--table"}},
		{name: "server rejects", alter: "DROP COLUMN nosuch", keywords: []string{"the server rejects the ALTER", "nosuch"}},
		// What a copy cannot carry over.
		{name: "triggers", setup: []string{"CREATE TRIGGER trg_t BEFORE UPDATE ON t FOR EACH ROW SET NEW.b = 1"}, keywords: []string{"has triggers (`trg_t`)", "SHOW CREATE TRIGGER"}},
		{name: "foreign key to a parent", setup: []string{"CREATE TABLE p (id INT PRIMARY KEY)", "INSERT INTO p SELECT seq FROM seq_0_to_6",
			"ALTER TABLE t ADD CONSTRAINT fk_tp FOREIGN KEY (b) REFERENCES p (id) ON DELETE SET NULL"}, alter: "ADD COLUMN x INT, ALGORITHM=COPY",
			keywords: []string{"has foreign keys (`fk_tp` -> ", "does not support foreign keys yet"}},
		{name: "referenced by a child", setup: []string{"CREATE TABLE ch (id INT PRIMARY KEY, tid INT, CONSTRAINT fk_ch FOREIGN KEY (tid) REFERENCES t (id))", "INSERT INTO ch VALUES (1, 5)"},
			keywords: []string{"is referenced by foreign keys (`fk_ch` of ", "does not support foreign keys yet"}},
		{name: "adds a foreign key", setup: []string{"CREATE TABLE p (id INT PRIMARY KEY)"}, alter: "ADD CONSTRAINT fk_new FOREIGN KEY (b) REFERENCES p (id)",
			keywords: []string{"the ALTER adds a foreign key"}},
		// Other runs.
		{name: "ghost left", setup: []string{"CREATE TABLE _t_new LIKE t"}, keywords: []string{"_t_new` already exists", "recast cleanup --database"}},
		{name: "sentry left", setup: []string{"CREATE TABLE t_rcsentry (id INT) ENGINE=MEMORY COMMENT='recast cut-over sentry'"}, keywords: []string{"t_rcsentry` already exists", "recast cleanup"}},
		{name: "old table kept", setup: []string{"CREATE TABLE _t_old LIKE t"}, keywords: []string{"_t_old` exists", "--drop-old-table"}},
		{name: "another recast", flags: holdLock, keywords: []string{"another recast is already migrating", "holds the lock \"recast:", "connection "}},
		// The data the new definition would reject.
		{name: "add unique over duplicates", alter: "ADD UNIQUE KEY ub (b)", keywords: []string{"unique key `ub` (`b`) would reject rows", "appears", "drop the others", "rows id="}},
		{name: "not null over nulls", alter: "MODIFY b INT NOT NULL", keywords: []string{"makes column `b` NOT NULL", "row id=10"}},
		{name: "collation makes duplicates", setup: []string{"ALTER TABLE t ADD COLUMN k VARCHAR(10) COLLATE utf8mb4_bin NULL, ADD UNIQUE KEY uk (k)", "UPDATE t SET k = 'Q' WHERE id = 7", "UPDATE t SET k = 'q' WHERE id = 8"},
			alter: "MODIFY k VARCHAR(10) COLLATE utf8mb4_general_ci NULL", keywords: []string{"unique key `uk` (`k`) would reject rows", "under the new definition", "rows id=7, id=8"}},
		{name: "narrowing truncates", alter: "MODIFY c VARCHAR(5)", keywords: []string{"would change or lose data: column `c` becomes varchar(5)", "row id=6"}},
		// Found by the copy (the ghost table exists, and is dropped).
		// An integer narrowed below a value it holds: refused by the
		// preflight's numeric-range check, before anything is created.
		{name: "integer narrowing before the copy", setup: []string{"UPDATE t SET b = 1000 WHERE id = 1700"},
			alter: "MODIFY b TINYINT NULL", keywords: []string{"column `b` becomes tinyint", "rows hold 1000", "id=1700"}},
		// A DOUBLE narrowed to INT is not range-checked up front: the copy's
		// warning (1264) stops it.
		{name: "out of range during the copy", setup: []string{"ALTER TABLE t ADD COLUMN d DOUBLE NULL", "UPDATE t SET d = 1e12 WHERE id = 1700"},
			alter: "MODIFY d INT NULL", keywords: []string{"would change or lose data", "Out of range value for column 'd'"}},
		// --set-vars.
		{name: "set-vars unknown", flags: setVars("no_such_var_x=1"), keywords: []string{"--set-vars: the server has no variable no_such_var_x"}},
		{name: "set-vars global-only", flags: setVars("max_connections=10"), keywords: []string{"--set-vars: max_connections is global-only"}},
		{name: "set-vars read-only", flags: setVars("version='x'"), keywords: []string{"--set-vars: version is read-only"}},
		{name: "set-vars recast's own", flags: setVars("autocommit=0"), keywords: []string{"--set-vars sets autocommit, which recast sets itself"}},
		{name: "set-vars not row", flags: setVars("binlog_format=STATEMENT"), keywords: []string{"needs binlog_format=ROW"}},
		{name: "set-vars bad value", flags: setVars("long_query_time='abc'"), keywords: []string{"--set-vars", "long_query_time", "fix: correct or leave out that variable"}},
		{name: "set-vars syntax", flags: setVars("a=1;DROP TABLE t"), exit: 2, keywords: []string{"--set-vars: value", "quote it"}},
		{name: "set-vars driver option", flags: setVars("timeout=1"), exit: 2, keywords: []string{"not a server variable"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}

func setVars(s string) func(*testing.T, string, *sql.DB) []string {
	return func(*testing.T, string, *sql.DB) []string { return []string{"--set-vars", s} }
}

// holdLock takes the per-table lock the way a running recast holds it.
func holdLock(t *testing.T, schema string, db *sql.DB) []string {
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var got int
	if err := conn.QueryRowContext(context.Background(), "SELECT GET_LOCK(?, 0)", check.LockName(schema, "t")).Scan(&got); err != nil || got != 1 {
		t.Fatalf("GET_LOCK: %d %v", got, err)
	}
	return nil
}

// TestMigrateRefusesServerSettings changes GLOBAL binlog settings of the
// shared test server: not parallel, restored afterwards. (log_bin cannot be
// switched at runtime: internal/check tests it with a faked server.)
func TestMigrateRefusesServerSettings(t *testing.T) {
	schema := testutil.NewSchema(t)
	admin := testutil.DB(t, schema)
	for _, c := range []struct {
		name, set, restore string
		keywords           []string
	}{
		{"binlog_format statement", "SET GLOBAL binlog_format = 'STATEMENT'", "SET GLOBAL binlog_format = 'ROW'",
			[]string{"binlog_format is STATEMENT", "SET GLOBAL binlog_format=ROW", "--set-vars binlog_format=ROW"}},
		{"binlog_format mixed", "SET GLOBAL binlog_format = 'MIXED'", "SET GLOBAL binlog_format = 'ROW'",
			[]string{"binlog_format is MIXED"}},
		{"binlog_row_image minimal", "SET GLOBAL binlog_row_image = 'MINIMAL'", "SET GLOBAL binlog_row_image = 'FULL'",
			[]string{"binlog_row_image is MINIMAL", "SET GLOBAL binlog_row_image=FULL"}},
		{"log_bin_compress", "SET GLOBAL log_bin_compress = ON", "SET GLOBAL log_bin_compress = OFF",
			[]string{"log_bin_compress is ON", "SET GLOBAL log_bin_compress=OFF"}},
		{"binlog_transaction_compression", "SET GLOBAL binlog_transaction_compression = ON", "SET GLOBAL binlog_transaction_compression = OFF",
			[]string{"binlog_transaction_compression is ON", "SET GLOBAL binlog_transaction_compression=OFF"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mysql := testutil.Server(t).MySQL()
			if c.name == "log_bin_compress" && mysql || c.name == "binlog_transaction_compression" && !mysql {
				t.Skipf("%s is not a setting of this server", c.name)
			}
			testutil.Exec(t, admin, c.set)
			t.Cleanup(func() { testutil.Exec(t, admin, c.restore) })
			cliCase{name: c.name, keywords: c.keywords}.run(t)
		})
	}
}

// TestSetVarsBinlogFormatRow: the seed case of --set-vars: recast's own
// sessions log rows; the migration runs through.
func TestSetVarsBinlogFormatRow(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	cliAccount(t, db)
	testutil.Exec(t, db,
		"CREATE TABLE t (id INT NOT NULL PRIMARY KEY, a VARCHAR(100) NOT NULL)",
		"INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_500")
	before := testutil.TableChecksum(t, db, schema, "t", "id")
	sb := testutil.Sandbox(t)
	code, out := runCLI(t, "migrate", "--host", sb.Primary.Host, "--port", strconv.Itoa(sb.Primary.Port),
		"--user", cliUser, "--password", cliPassword, "--database", schema, "--table", "t",
		"--alter", "ADD COLUMN note VARCHAR(10) NULL, ALGORITHM=COPY", "--execute", "--progress-interval", "0",
		"--set-vars", "binlog_format=row,innodb_lock_wait_timeout=7")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if strings.Contains(out, cliPassword) {
		t.Errorf("the password appears in the output:\n%s", out)
	}
	if got := testutil.TableChecksum(t, db, schema, "_t_old", "id"); got != before {
		t.Errorf("old table %s, want %s", got, before)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE note IS NULL").Scan(&n); err != nil || n != 500 {
		t.Errorf("new table: %d rows, %v", n, err)
	}
}
