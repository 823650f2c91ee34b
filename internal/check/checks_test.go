package check

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, 0)) }

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newInput opens a recast connection to schema and an Input for tbl.
func newInput(t *testing.T, schema, tbl, alter string) *Input {
	t.Helper()
	sb := testutil.Sandbox(t)
	cfg := dbconn.Config{Host: sb.Primary.Host, Port: sb.Primary.Port, User: sb.User, Password: sb.Password, Schema: schema}
	db, err := dbconn.Open(ctxFor(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	in := &Input{DB: db, Conn: cfg, Database: schema, Table: tbl, Alter: alter,
		GhostName: "_" + tbl + "_new", OldName: "_" + tbl + "_old", SentryName: tbl + "_rcsentry", CheckpointName: "_" + tbl + "_chk"}
	t.Cleanup(in.Release)
	return in
}

const baseTable = "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, a VARCHAR(20) NOT NULL, b INT NULL, e VARCHAR(20) COLLATE utf8mb4_bin NULL, UNIQUE KEY ue (e))"

// TestChecks builds each bad situation and runs all checks: the refusal
// must come from the expected check, with the expected words.
func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setup    []string // run in a fresh schema after baseTable and 5 rows
		table    string   // default t
		alter    string   // default FORCE
		mod      func(in *Input)
		check    string // "" means: passes
		keywords []string
		mariadb  bool // the setup uses MariaDB-only features (sequences, system versioning)
		mysql    bool // the refusal is MySQL's only
		lax      bool // recast's session (the server's sql_mode) not strict
	}{
		{name: "passes", check: ""},
		{name: "table missing", table: "nosuch", check: "table", keywords: []string{"table `", "nosuch` does not exist", "check --database and --table"}},
		{name: "table case", table: "T", check: "table", keywords: []string{"does not exist", "did you mean --table t"}},
		{name: "view", setup: []string{"CREATE VIEW v AS SELECT * FROM t"}, table: "v", check: "table", keywords: []string{"is a view", "base table"}},
		{name: "myisam", setup: []string{"CREATE TABLE m (id INT PRIMARY KEY) ENGINE=MyISAM"}, table: "m", check: "table", keywords: []string{"uses the MyISAM engine", "InnoDB", "ENGINE=InnoDB"}},
		{name: "sequence", setup: []string{"CREATE SEQUENCE sq"}, table: "sq", check: "table", keywords: []string{"is a sequence"}, mariadb: true},
		{name: "versioned", setup: []string{"CREATE TABLE sv (id INT PRIMARY KEY, x INT) WITH SYSTEM VERSIONING"}, table: "sv", check: "system-versioning", keywords: []string{"system-versioned", "history"}, mariadb: true},
		{name: "syntax", alter: "ADD COLUMN x INTT", check: "alter", keywords: []string{"syntax error at line 1, column"}},
		{name: "rename to", alter: "RENAME TO t2", check: "alter", keywords: []string{"RENAME TO"}},
		{name: "partitions", alter: "REMOVE PARTITIONING", check: "alter", keywords: []string{"partition"}},
		{name: "tablespace", alter: "DISCARD TABLESPACE", check: "alter", keywords: []string{"TABLESPACE"}},
		{name: "several statements", alter: "ADD COLUMN x INT; DROP TABLE t", check: "alter", keywords: []string{"several statements"}},
		{name: "other table", alter: "ALTER TABLE u ADD COLUMN x INT", check: "alter", keywords: []string{"ALTER of `u`"}},
		{name: "other schema", alter: "ALTER TABLE otherdb.t ADD COLUMN x INT", check: "alter", keywords: []string{"ALTER of `otherdb`.`t`"}},
		{name: "check constraint named", setup: []string{"ALTER TABLE t ADD CONSTRAINT positive_b CHECK (b > 0)"}, mysql: true,
			check: "check-constraint-names", keywords: []string{"has CHECK constraints named `positive_b`", "t_chk_N", "own ALTER TABLE"}},
		{name: "check constraint unnamed", setup: []string{"ALTER TABLE t ADD CHECK (b > 0)"}, check: ""},
		{name: "triggers", setup: []string{"CREATE TRIGGER trg_a BEFORE INSERT ON t FOR EACH ROW SET NEW.b = 1"}, check: "triggers", keywords: []string{"has triggers (`trg_a`)", "SHOW CREATE TRIGGER"}},
		{name: "fk child", setup: []string{"CREATE TABLE p (id INT PRIMARY KEY)", "CREATE TABLE c (id INT PRIMARY KEY, pid INT, CONSTRAINT fk_c FOREIGN KEY (pid) REFERENCES p (id))"},
			table: "c", check: "foreign-keys", keywords: []string{"has foreign keys (`fk_c` -> ", "`p`", "not support foreign keys"}},
		{name: "fk parent", setup: []string{"CREATE TABLE c (id INT PRIMARY KEY, tid INT, CONSTRAINT fk_t FOREIGN KEY (tid) REFERENCES t (id))"},
			check: "foreign-keys", keywords: []string{"is referenced by foreign keys (`fk_t` of ", "follow the old table"}},
		{name: "adds fk", setup: []string{"CREATE TABLE p (id INT PRIMARY KEY)"}, alter: "ADD CONSTRAINT fk_b FOREIGN KEY (b) REFERENCES p (id)",
			check: "foreign-keys", keywords: []string{"the ALTER adds a foreign key"}},
		{name: "ghost left", setup: []string{"CREATE TABLE _t_new LIKE t"}, check: "helper-tables", keywords: []string{"helper table", "_t_new` already exists", "plus --resume", "recast cleanup --database", "--initially-drop-ghost-table"}},
		{name: "ghost left, --resume", setup: []string{"CREATE TABLE _t_new LIKE t", "CREATE TABLE _t_chk (id INT)"}, mod: func(in *Input) { in.Resume = true }},
		{name: "checkpoint left", setup: []string{"CREATE TABLE _t_chk (id INT)"}, check: "helper-tables", keywords: []string{"_t_chk` already exists", "--resume", "recast cleanup"}},
		{name: "sentry left", setup: []string{"CREATE TABLE t_rcsentry (id INT) ENGINE=MEMORY"}, check: "helper-tables", keywords: []string{"t_rcsentry` already exists", "recast cleanup"}},
		{name: "old table kept", setup: []string{"CREATE TABLE _t_old LIKE t"}, check: "helper-tables", keywords: []string{"_t_old` exists", "earlier migration", "--drop-old-table", "--timestamp-old-table", "--initially-drop-old-table"}},
		{name: "old table, drop-old", setup: []string{"CREATE TABLE _t_old LIKE t"}, mod: func(in *Input) { in.DropOld = true }},
		{name: "old table, initially-drop", setup: []string{"CREATE TABLE _t_old LIKE t"}, mod: func(in *Input) { in.DropOldFirst = true }},
		{name: "old table, timestamped", setup: []string{"CREATE TABLE _t_old LIKE t"}, mod: func(in *Input) { in.OldName = "_t_20261124000000_old" }},
		{name: "timestamped old table taken", setup: []string{"CREATE TABLE _t_20261124000000_old LIKE t"}, mod: func(in *Input) { in.OldName = "_t_20261124000000_old" },
			check: "helper-tables", keywords: []string{"_t_20261124000000_old` exists", "--initially-drop-old-table"}},
		{name: "ghost left, initially-drop", setup: []string{"CREATE TABLE _t_new LIKE t", "CREATE TABLE _t_chk (id INT)"}, mod: func(in *Input) { in.DropGhostFirst = true }},
		{name: "sentry left, initially-drop-ghost", setup: []string{"CREATE TABLE t_rcsentry (id INT) ENGINE=MEMORY"}, mod: func(in *Input) { in.DropGhostFirst = true },
			check: "helper-tables", keywords: []string{"t_rcsentry` already exists", "recast cleanup"}},
		{name: "no key", setup: []string{"CREATE TABLE nk (a INT, b INT, UNIQUE KEY (a))", "INSERT INTO nk VALUES (1, 1)"}, table: "nk",
			check: "chunk-key", keywords: []string{"no usable key", "PRIMARY KEY or a UNIQUE key on NOT NULL columns"}},
		{name: "key dropped", alter: "DROP PRIMARY KEY", check: "chunk-key", keywords: []string{"no usable key"}},
		{name: "pk change over shared unique", setup: []string{"UPDATE t SET e = 'z' WHERE id = 4", "ALTER TABLE t MODIFY e VARCHAR(20) COLLATE utf8mb4_bin NOT NULL"}, alter: "DROP PRIMARY KEY, ADD PRIMARY KEY (e)"},
		{name: "server rejects", alter: "DROP COLUMN nosuch", check: "chunk-key", keywords: []string{"the server rejects the ALTER", "nosuch", "nothing was changed"}},
		{name: "not null over nulls", alter: "MODIFY b INT NOT NULL", check: "not-null", keywords: []string{"makes column `b` NOT NULL", "row id=2", "IS NULL"}},
		{name: "renamed not null", alter: "CHANGE b b2 INT NOT NULL", check: "not-null", keywords: []string{"`b` (new name `b2`) NOT NULL"}},
		{name: "primary key over nulls", alter: "DROP PRIMARY KEY, ADD PRIMARY KEY (id, b), ADD UNIQUE KEY (id)", check: "not-null", keywords: []string{"`b` NOT NULL"}},
		{name: "not null, no nulls", alter: "MODIFY a VARCHAR(30) NOT NULL"},
		{name: "narrowing", alter: "MODIFY a VARCHAR(2) NOT NULL", check: "narrowing", keywords: []string{"would change or lose data: column `a` becomes varchar(2) (at most 2 characters)", "row id=3", "CHAR_LENGTH(`a`) > 2"}},
		{name: "zerofill to text", alter: "MODIFY b VARCHAR(20) NULL", setup: []string{"ALTER TABLE t MODIFY b INT(5) UNSIGNED ZEROFILL NULL"},
			check: "number-text", keywords: []string{"column `b` int(5) unsigned zerofill becomes varchar(20)", "formatted text"}},
		{name: "double(m,d) to bytes", alter: "MODIFY b VARBINARY(20) NULL", setup: []string{"ALTER TABLE t MODIFY b DOUBLE(10,2) NULL"},
			check: "number-text", keywords: []string{"column `b` double(10,2) becomes varbinary(20)"}},
		{name: "zerofill to number", alter: "MODIFY b BIGINT NULL", setup: []string{"ALTER TABLE t MODIFY b INT(5) UNSIGNED ZEROFILL NULL"}, check: ""},
		{name: "narrowing to bytes", alter: "MODIFY a TINYBLOB NOT NULL", setup: []string{"ALTER TABLE t MODIFY a TEXT NOT NULL", "UPDATE t SET a = REPEAT('z', 300) WHERE id = 4"},
			check: "narrowing", keywords: []string{"becomes tinyblob (at most 255 bytes)", "row id=4"}},
		{name: "narrowing charset", alter: "MODIFY a TINYTEXT CHARACTER SET utf8mb4 NOT NULL", setup: []string{"ALTER TABLE t MODIFY a VARCHAR(200) CHARACTER SET latin1 NOT NULL", "UPDATE t SET a = REPEAT(_latin1 0xE9, 200) WHERE id = 1"},
			check: "narrowing", keywords: []string{"becomes tinytext (at most 255 bytes)", "row id=1", "LENGTH(CONVERT(`a` USING utf8mb4)) > 255"}},
		{name: "widening", alter: "MODIFY a VARCHAR(200) NOT NULL, MODIFY e TEXT COLLATE utf8mb4_bin NULL, DROP INDEX ue"},
		{name: "add unique over duplicates", alter: "ADD UNIQUE KEY ua (a)", check: "unique", keywords: []string{"unique key `ua` (`a`) would reject rows", "a='dup' appears 2 times", "rows id=3, id=4", "drop the others"}},
		{name: "add unique, no duplicates", alter: "ADD UNIQUE KEY ub (id, a)"},
		{name: "add primary over duplicates", alter: "DROP PRIMARY KEY, ADD PRIMARY KEY (a), ADD UNIQUE KEY (id)",
			check: "unique", keywords: []string{"PRIMARY KEY (`a`) would reject rows"}},
		{name: "collation makes duplicates", alter: "MODIFY e VARCHAR(20) COLLATE utf8mb4_general_ci NULL", check: "unique", keywords: []string{"unique key `ue`", "appears 2 times under the new definition"}},
		{name: "unique prefix", alter: "ADD UNIQUE KEY up (e(1))", check: "unique", keywords: []string{"unique key `up`", "e='x' appears 2 times"}},
		{name: "new column, one default", alter: "ADD COLUMN z INT NOT NULL DEFAULT 0, ADD UNIQUE KEY uz (z)", check: "unique", keywords: []string{"only new columns with one default value", "all rows but one"}},
		{name: "new column with old", alter: "ADD COLUMN z INT NOT NULL DEFAULT 0, ADD UNIQUE KEY uz (z, a)", check: "unique", keywords: []string{"unique key `uz`", "a='dup' appears 2 times"}},
		{name: "new auto_increment", setup: []string{"ALTER TABLE t DROP PRIMARY KEY, ADD UNIQUE KEY (id)"}, alter: "ADD COLUMN z INT NOT NULL AUTO_INCREMENT, ADD PRIMARY KEY (z)"},
		{name: "new nullable column", alter: "ADD COLUMN z INT NULL, ADD UNIQUE KEY uz (z)"},
		{name: "key rounds datetime", setup: []string{"CREATE TABLE kt (id INT NOT NULL, ts DATETIME(6) NOT NULL, PRIMARY KEY (id, ts))"}, table: "kt",
			alter: "MODIFY ts DATETIME NOT NULL", check: "key-type",
			keywords: []string{"column `ts` of the new table's PRIMARY KEY (`id`, `ts`) datetime (was datetime(6))", "rounds fractional seconds to 0 digits", "two rows could become one"}},
		{name: "key fsp widened", setup: []string{"CREATE TABLE kt (id INT NOT NULL, ts DATETIME(3) NOT NULL, PRIMARY KEY (id, ts))"}, table: "kt",
			alter: "MODIFY ts DATETIME(6) NOT NULL, MODIFY id BIGINT NOT NULL"},
		{name: "key decimal rounds", setup: []string{"CREATE TABLE kd (id DECIMAL(10,4) NOT NULL PRIMARY KEY, x INT)"}, table: "kd",
			alter: "MODIFY id DECIMAL(10,2) NOT NULL", check: "key-type", keywords: []string{"PRIMARY KEY (`id`) decimal(10,2) (was decimal(10,4))", "rounds its values to 2 decimals"}},
		{name: "widened key rounds", setup: []string{"CREATE TABLE kw (id INT NOT NULL PRIMARY KEY, ts DATETIME(6) NOT NULL)"}, table: "kw",
			alter: "DROP PRIMARY KEY, ADD PRIMARY KEY (id, ts), MODIFY ts DATETIME NOT NULL", check: "key-type", keywords: []string{"PRIMARY KEY (`id`, `ts`) datetime (was datetime(6))"}},
		{name: "unique containing the key rounds: watched while written", setup: []string{"CREATE TABLE ku (id INT NOT NULL PRIMARY KEY, ts DATETIME(6) NOT NULL, UNIQUE KEY uit (id, ts))"},
			table: "ku", alter: "MODIFY ts DATETIME NOT NULL"},
		{name: "other unique rounds: watched while written", setup: []string{"ALTER TABLE t ADD COLUMN d DECIMAL(10,4) NULL, ADD UNIQUE KEY ud (d)"},
			alter: "MODIFY d DECIMAL(10,2) NULL"},
		{name: "key timestamp to datetime, DST", setup: []string{"CREATE TABLE kz (ts TIMESTAMP NOT NULL PRIMARY KEY, x INT)"}, table: "kz",
			alter: "MODIFY ts DATETIME NOT NULL", mod: func(in *Input) { in.DST = true }, check: "key-type", keywords: []string{"daylight-saving"}},
		{name: "key timestamp to datetime, no DST", setup: []string{"CREATE TABLE kz (ts TIMESTAMP NOT NULL PRIMARY KEY, x INT)"}, table: "kz",
			alter: "MODIFY ts DATETIME NOT NULL"},
		{name: "key bigint to double", setup: []string{"CREATE TABLE kd (id BIGINT NOT NULL PRIMARY KEY, x INT)"}, table: "kd",
			alter: "MODIFY id DOUBLE NOT NULL", check: "key-type", keywords: []string{"PRIMARY KEY (`id`) double (was bigint", "DOUBLE's 53-bit precision"}},
		{name: "key varbinary to binary", setup: []string{"CREATE TABLE kb (id VARBINARY(16) NOT NULL PRIMARY KEY, x INT)"}, table: "kb",
			alter: "MODIFY id BINARY(16) NOT NULL", check: "key-type", keywords: []string{"PRIMARY KEY (`id`) binary(16) (was varbinary(16))", "pads values with 0x00"}},
		{name: "number to enum", setup: []string{"CREATE TABLE ne (id INT NOT NULL PRIMARY KEY, d DECIMAL(3,0) NULL)"}, table: "ne",
			alter: "MODIFY d ENUM('0','1','2') NULL", check: "number-text", keywords: []string{"column `d` decimal(3,0) becomes enum('0','1','2')", "member's index"}},
		{name: "int to set", setup: []string{"CREATE TABLE ne (id INT NOT NULL PRIMARY KEY, i INT NULL)"}, table: "ne",
			alter: "MODIFY i SET('1','2') NULL", check: "number-text"},
		{name: "new not null without default", alter: "ADD COLUMN nn INT NOT NULL", check: "not-null", keywords: []string{"new column `nn` int", "NOT NULL without a DEFAULT"}},
		{name: "new not null with default", alter: "ADD COLUMN nn INT NOT NULL DEFAULT 0, ADD COLUMN nt TEXT NULL"},
		{name: "key int to double", setup: []string{"CREATE TABLE kd (id INT NOT NULL PRIMARY KEY, x INT)"}, table: "kd", alter: "MODIFY id DOUBLE NOT NULL"},
		{name: "widened key text to number", setup: []string{"CREATE TABLE st (id INT NOT NULL PRIMARY KEY, code VARCHAR(10) NOT NULL)", "INSERT INTO st VALUES (1, '01'), (2, '1')"},
			table: "st", alter: "DROP PRIMARY KEY, ADD PRIMARY KEY (id, code), MODIFY code INT NOT NULL", check: "key-type", keywords: []string{"PRIMARY KEY (`id`, `code`) int", "reads text as a number or a date"}},
		{name: "key narrowed, strict", setup: []string{"CREATE TABLE kn (id BIGINT NOT NULL PRIMARY KEY, x INT)", "INSERT INTO kn VALUES (1, 1)"}, table: "kn", alter: "MODIFY id INT NOT NULL"},
		{name: "key narrowed, not strict", setup: []string{"CREATE TABLE kn (id BIGINT NOT NULL PRIMARY KEY, x INT)", "INSERT INTO kn VALUES (1, 1)"}, table: "kn", alter: "MODIFY id INT NOT NULL",
			lax: true}, // an out-of-range value fails the copy (a warning) and the applier (strict)
		{name: "fulltext: checked later", setup: []string{"CREATE TABLE ft (id INT PRIMARY KEY, body TEXT, FULLTEXT KEY (body))"}, table: "ft", alter: "ADD COLUMN x INT"},
		{name: "set-vars global-only", mod: func(in *Input) { in.Conn.SetVars = map[string]string{"max_connections": "5"} },
			check: "set-vars", keywords: []string{"max_connections is global-only"}},
		{name: "set-vars unknown", mod: func(in *Input) { in.Conn.SetVars = map[string]string{"no_such_variable_x": "5"} },
			check: "set-vars", keywords: []string{"no variable no_such_variable_x"}},
		{name: "set-vars read-only", mod: func(in *Input) { in.Conn.SetVars = map[string]string{"version": "5"} },
			check: "set-vars", keywords: []string{"version is read-only"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.mariadb && testutil.Server(t).MySQL() {
				t.Skip("MariaDB-only feature")
			}
			if tc.mysql && !testutil.Server(t).MySQL() {
				t.Skip("MySQL's refusal")
			}
			schema := testutil.NewSchema(t)
			db := testutil.DB(t, schema)
			testutil.Exec(t, db, baseTable,
				"INSERT INTO t VALUES (1, 'a', 1, 'x'), (2, 'b', NULL, 'X'), (3, 'dup', 3, 'xy'), (4, 'dup', 4, NULL), (5, 'c', 5, 'y')")
			testutil.Exec(t, db, tc.setup...)
			tbl, alter := tc.table, tc.alter
			if tbl == "" {
				tbl = "t"
			}
			if alter == "" {
				alter = "FORCE"
			}
			in := newInput(t, schema, tbl, alter)
			if tc.lax {
				cfg := in.Conn
				cfg.SQLMode = "NO_ENGINE_SUBSTITUTION"
				lax, err := dbconn.Open(ctxFor(t), cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { lax.Close() })
				in.DB, in.Conn = lax, cfg
			}
			if tc.mod != nil {
				tc.mod(in)
			}
			before := tableNames(t, db, schema)
			err := Run(ctxFor(t), in)
			if got := tableNames(t, db, schema); got != before {
				t.Errorf("the checks changed the schema: %s -> %s", before, got)
			}
			if tc.check == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Check != tc.check {
				t.Fatalf("want a refusal by %q, got %v (%#v)", tc.check, err, ce)
			}
			t.Log(err)
			assertRefusal(t, err, tc.keywords...)
		})
	}
}

func tableNames(t *testing.T, db *sql.DB, schema string) string {
	t.Helper()
	var s sql.NullString
	if err := db.QueryRow("SELECT GROUP_CONCAT(TABLE_NAME ORDER BY TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", schema).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s.String
}

// TestPassFillsInput: a passing run leaves the source, the analysis, the
// new definition and the chunk key, and holds the per-table lock until
// Release.
func TestPassFillsInput(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, baseTable)
	in := newInput(t, schema, "t", "ADD COLUMN z INT, CHANGE a a2 VARCHAR(20) NOT NULL")
	if err := Run(ctxFor(t), in); err != nil {
		t.Fatal(err)
	}
	if in.Source == nil || in.Analysis == nil || in.Ghost == nil || strings.Join(in.Key, ",") != "id" || len(in.Pairs) != 4 {
		t.Fatalf("input: source %v, analysis %v, ghost %v, key %v, pairs %v", in.Source != nil, in.Analysis != nil, in.Ghost != nil, in.Key, in.Pairs)
	}
	want := "mariadb"
	if testutil.Server(t).MySQL() {
		want = "mysql"
	}
	if in.Flavor != want || in.Version == "" {
		t.Errorf("flavor %q version %q", in.Flavor, in.Version)
	}
	name := LockName(schema, "t")
	var holder sql.NullInt64
	if err := db.QueryRow("SELECT IS_USED_LOCK(?)", name).Scan(&holder); err != nil || !holder.Valid {
		t.Fatalf("lock %s not held: %v %v", name, holder, err)
	}
	in.Release()
	if err := db.QueryRow("SELECT IS_USED_LOCK(?)", name).Scan(&holder); err != nil || holder.Valid {
		t.Fatalf("lock %s still held after Release: %v %v", name, holder, err)
	}
}

// TestLockHeldElsewhere: a second run on the same table is refused and
// names the session holding the lock.
func TestLockHeldElsewhere(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, baseTable)
	first := newInput(t, schema, "t", "FORCE")
	if err := Run(ctxFor(t), first); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := db.QueryRow("SELECT IS_USED_LOCK(?)", LockName(schema, "t")).Scan(&id); err != nil {
		t.Fatal(err)
	}
	second := newInput(t, schema, "t", "FORCE")
	err := Run(ctxFor(t), second)
	var ce *Error
	if !errors.As(err, &ce) || ce.Check != "lock" {
		t.Fatalf("want a refusal by the lock check, got %v", err)
	}
	assertRefusal(t, err, "another recast is already migrating", fmt.Sprintf("connection %d", id), LockName(schema, "t"))
	// Another table is not affected.
	testutil.Exec(t, db, "CREATE TABLE t2 LIKE t")
	if err := Run(ctxFor(t), newInput(t, schema, "t2", "FORCE")); err != nil {
		t.Errorf("other table: %v", err)
	}
	first.Release()
	third := newInput(t, schema, "t", "FORCE")
	if err := Run(ctxFor(t), third); err != nil {
		t.Errorf("after release: %v", err)
	}
}

// TestPrivileges connects as a user with too few grants: the refusal names
// what is missing and the exact GRANT statements; once they are run, the
// same user passes.
func TestPrivileges(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, baseTable)
	user := "lim_" + schema[len(schema)-4:]
	testutil.Exec(t, db,
		fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY 'pw-x7'", user),
		fmt.Sprintf("GRANT REPLICATION SLAVE ON *.* TO '%s'@'127.0.0.1'", user),
		fmt.Sprintf("GRANT SELECT, INSERT, DELETE ON `%s`.* TO '%s'@'127.0.0.1'", schema, user),
		fmt.Sprintf("GRANT ALTER ON `%s`.`t` TO '%s'@'127.0.0.1'", schema, user), // table-level: not enough
	)
	t.Cleanup(func() { db.Exec(fmt.Sprintf("DROP USER '%s'@'127.0.0.1'", user)) })
	sb := testutil.Sandbox(t)
	open := func() *Input {
		cfg := dbconn.Config{Host: sb.Primary.Host, Port: sb.Primary.Port, User: user, Password: "pw-x7", Schema: schema}
		udb, err := dbconn.Open(ctxFor(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { udb.Close() })
		in := &Input{DB: udb, Conn: cfg, Database: schema, Table: "t", Alter: "FORCE", GhostName: "_t_new", OldName: "_t_old", SentryName: "t_rcsentry"}
		t.Cleanup(in.Release)
		return in
	}
	err := Run(ctxFor(t), open())
	var ce *Error
	if !errors.As(err, &ce) || ce.Check != "privileges" {
		t.Fatalf("want a refusal by the privileges check, got %v", err)
	}
	account := fmt.Sprintf("'%s'@'127.0.0.1'", user)
	grantGlobal := "GRANT REPLICATION CLIENT, PROCESS ON *.* TO " + account
	grantSchema := fmt.Sprintf("GRANT CREATE, DROP, ALTER, LOCK TABLES, CREATE TEMPORARY TABLES ON `%s`.* TO %s", schema, account)
	grants := []string{grantGlobal, grantSchema}
	for _, s := range testutil.Server(t).ReadSchemas() { // MySQL: performance_schema
		grants = append(grants, fmt.Sprintf("GRANT SELECT ON `%s`.* TO %s", s, account))
	}
	assertRefusal(t, err, append([]string{"lacks privileges recast needs"}, grants...)...)
	testutil.Exec(t, db, grants...)
	if err := Run(ctxFor(t), open()); err != nil {
		t.Fatalf("after the GRANTs: %v", err)
	}
}
