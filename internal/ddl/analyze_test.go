package ddl

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

type want struct {
	ghost                    string // "" means: same as the statement
	renames                  map[string]string
	dropped, added, modified []string
	unique, dropsPK, addsPK  bool
	fk                       bool
	algorithm, lock, waitOpt string
}

func TestAnalyze(t *testing.T) {
	cases := []struct {
		body string
		want want
	}{
		{"ADD COLUMN c1 INT", want{added: []string{"c1"}}},
		{"ADD c1 INT, ADD COLUMN (c2 INT, c3 UUID)", want{added: []string{"c1", "c2", "c3"}}},
		{"DROP COLUMN d", want{dropped: []string{"d"}}},
		{"DROP d, DROP COLUMN IF EXISTS `E`", want{dropped: []string{"d", "E"}}},
		{"MODIFY c BIGINT", want{modified: []string{"c"}}},
		{"MODIFY COLUMN c BIGINT NOT NULL", want{modified: []string{"c"}}},
		{"ADD INDEX (c)", want{}},
		{"ADD INDEX i (c), DROP INDEX j", want{}},
		{"DROP INDEX i", want{}},
		{"ADD UNIQUE (c)", want{unique: true}},
		{"ADD UNIQUE KEY u (a, b)", want{unique: true}},
		{"ADD CONSTRAINT u UNIQUE INDEX (a)", want{unique: true}},
		{"CHANGE a b VARCHAR(10)", want{renames: map[string]string{"a": "b"}, modified: []string{"a"}}},
		{"CHANGE COLUMN `A` `B` INT UNIQUE", want{renames: map[string]string{"a": "B"}, modified: []string{"A"}, unique: true}},
		{"CHANGE a a BIGINT", want{modified: []string{"a"}}},
		{"RENAME COLUMN a TO b", want{renames: map[string]string{"a": "b"}}},
		{"MODIFY c VARCHAR(20) CHARACTER SET latin1", want{modified: []string{"c"}}},
		{"MODIFY c VARCHAR(20) CHARACTER SET ucs2 COLLATE ucs2_general_nopad_ci", want{modified: []string{"c"}}},
		{"CONVERT TO CHARACTER SET utf8mb4", want{}},
		{"CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_uca1400_ai_ci", want{}},
		{"DROP PRIMARY KEY", want{dropsPK: true}},
		{"DROP INDEX `PRIMARY`", want{dropsPK: true}},
		{"ADD PRIMARY KEY (a,b)", want{unique: true, addsPK: true}},
		{"DROP PRIMARY KEY, ADD PRIMARY KEY (a, b), ADD UNIQUE (id)", want{unique: true, addsPK: true, dropsPK: true}},
		{"MODIFY id INT NOT NULL PRIMARY KEY", want{modified: []string{"id"}, unique: true, addsPK: true}},
		{"ADD COLUMN id2 BIGINT UNIQUE KEY", want{added: []string{"id2"}, unique: true}},
		{"ADD FOREIGN KEY (a) REFERENCES p (id)", want{fk: true}},
		{"ALTER COLUMN c SET DEFAULT 5", want{modified: []string{"c"}}},
		{"FORCE", want{}},
		{"ENGINE=InnoDB", want{}},
		{"ENGINE = innodb, ROW_FORMAT=DYNAMIC", want{}},
		{"ADD COLUMN c INT, ALGORITHM=INPLACE", want{ghost: "ADD COLUMN c INT", added: []string{"c"}, algorithm: "INPLACE"}},
		{"ADD COLUMN c INT, LOCK=NONE", want{ghost: "ADD COLUMN c INT", added: []string{"c"}, lock: "NONE"}},
		{"algorithm = inplace, lock none ,\n ADD COLUMN c INT /* x */ , ALGORITHM=NOCOPY",
			want{ghost: "ADD COLUMN c INT /* x */", added: []string{"c"}, algorithm: "NOCOPY", lock: "NONE"}},
		{"ADD COLUMN c INT, -- first\n  LOCK=SHARED /* why */,\n  DROP d # last",
			want{ghost: "ADD COLUMN c INT,\n  DROP d", added: []string{"c"}, dropped: []string{"d"}, lock: "SHARED"}},
		{"ADD COLUMN c INT, LOCK=SHARED, DROP d", want{ghost: "ADD COLUMN c INT, DROP d", added: []string{"c"}, dropped: []string{"d"}, lock: "SHARED"}},
		{"ALGORITHM=COPY", want{ghost: "FORCE", algorithm: "COPY"}},
		{"WAIT 5 ADD COLUMN c INT", want{ghost: "ADD COLUMN c INT", added: []string{"c"}, waitOpt: "WAIT 5"}},
		{"NOWAIT DROP COLUMN c, ALGORITHM=INSTANT", want{ghost: "DROP COLUMN c", dropped: []string{"c"}, waitOpt: "NOWAIT", algorithm: "INSTANT"}},
		{"  ADD COLUMN c INT ;  ", want{ghost: "ADD COLUMN c INT", added: []string{"c"}}},
		{"ADD COLUMN c INT; -- done", want{ghost: "ADD COLUMN c INT", added: []string{"c"}}},
		{"ADD COLUMN `a,b` VARCHAR(10) DEFAULT 'x,;y' COMMENT \"lock=none\"", want{added: []string{"a,b"}}},
		{"ADD COLUMN algorithm INT, ADD COLUMN `lock` INT", want{added: []string{"algorithm", "lock"}}},
		// MariaDB-only forms (doc.go) analysed through the rewritten copy.
		{"ADD COLUMN ip INET6 NOT NULL INVISIBLE, MODIFY t TEXT COMPRESSED=zlib", want{added: []string{"ip"}, modified: []string{"t"}}},
		{"ADD COLUMN g POINT NOT NULL REF_SYSTEM_ID=4326, ADD SPATIAL INDEX (g)", want{added: []string{"g"}}},
		{"ADD COLUMN v INT AS (a + 1) PERSISTENT", want{added: []string{"v"}}},
		{"MODIFY c INT DEFAULT (a + 1), ADD COLUMN d CHAR(36) DEFAULT uuid()", want{modified: []string{"c"}, added: []string{"d"}}},
		{"ADD COLUMN (x INET4 DEFAULT (1+1) INVISIBLE, y VARCHAR(10) CHARACTER SET utf16)", want{added: []string{"x", "y"}}},
		{"ADD UNIQUE IF NOT EXISTS u (a), DROP FOREIGN KEY IF EXISTS fk, DROP CONSTRAINT IF EXISTS c", want{unique: true}},
		{"ADD PRIMARY KEY IF NOT EXISTS (a)", want{unique: true, addsPK: true}},
		{"ALTER INDEX i IGNORED, ADD INDEX j (a) NOT IGNORED", want{}},
		{"PAGE_COMPRESSED=1 PAGE_COMPRESSION_LEVEL=6, ADD COLUMN c INT", want{added: []string{"c"}}},
		{"ENCRYPTED=YES, ENCRYPTION_KEY_ID=2", want{}},
		{"ADD COLUMN c VARCHAR(5) DEFAULT _cp1251'x' COLLATE cp1251_bin", want{added: []string{"c"}}},
		{"ADD COLUMN IF NOT EXISTS c INT, MODIFY COLUMN IF EXISTS d BIGINT, CHANGE COLUMN IF EXISTS e f INT",
			want{added: []string{"c"}, modified: []string{"d", "e"}, renames: map[string]string{"e": "f"}}},
		{"ADD COLUMN c INT WITHOUT SYSTEM VERSIONING", want{added: []string{"c"}}},
	}
	for _, tc := range cases {
		a, err := Analyze(tc.body)
		if err != nil {
			t.Errorf("Analyze(%q): %v", tc.body, err)
			continue
		}
		w := tc.want
		stmt := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(tc.body), ";"))
		if w.ghost == "" {
			w.ghost = stmt
		}
		if w.renames == nil {
			w.renames = map[string]string{}
		}
		got := want{a.GhostStatement, a.Renames, a.Dropped, a.Added, a.Modified, a.AddsUnique, a.DropsPrimary,
			a.AddsPrimary, a.AddsForeignKey, a.Algorithm, a.Lock, a.Wait}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("Analyze(%q):\n got %+v\nwant %+v", tc.body, got, w)
		}
		if !strings.HasPrefix(stmt, a.Statement) || a.Statement == "" {
			t.Errorf("Analyze(%q).Statement = %q", tc.body, a.Statement)
		}
	}
}

func TestAnalyzeStatement(t *testing.T) {
	a, err := Analyze("\n ADD COLUMN c INT, ALGORITHM=INPLACE;;\n")
	if err != nil {
		t.Fatal(err)
	}
	if a.Statement != "ADD COLUMN c INT, ALGORITHM=INPLACE" {
		t.Errorf("Statement = %q", a.Statement)
	}
}

func TestAnalyzeRefused(t *testing.T) {
	cases := []struct{ body, want string }{
		{"", "the ALTER is empty"},
		{"  ; ", "the ALTER is empty"},
		{"/* nothing */", "the ALTER is empty"},
		{"ADD COLUMN c INT; DROP TABLE x", "several statements: more text follows ';' at line 1, column 19 near \"DROP TABLE x\""},
		{"ADD COLUMN c INT; garbage", "several statements"},
		{"RENAME TO t2", "RENAME TO renames the table"},
		{"ADD COLUMN c INT, RENAME AS t2", "RENAME TO renames the table"},
		{"ADD PARTITION (PARTITION p2 VALUES LESS THAN (20))", "partition management"},
		{"DROP PARTITION p1", "partition management"},
		{"COALESCE PARTITION 2", "partition management"},
		{"REORGANIZE PARTITION p0 INTO (PARTITION a VALUES LESS THAN (5))", "partition management"},
		{"TRUNCATE PARTITION p0, p1", "partition management"},
		{"EXCHANGE PARTITION p0 WITH TABLE t2", "partition management"},
		{"REBUILD PARTITION p0", "partition management"},
		{"ANALYZE PARTITION p0", "partition management"},
		{"REMOVE PARTITIONING", "partition management"},
		{"CONVERT PARTITION p0 TO TABLE t2", "partition management"},
		{"CONVERT TABLE t2 TO PARTITION p3 VALUES LESS THAN (30)", "partition management"},
		{"PARTITION BY HASH(id) PARTITIONS 4", "PARTITION BY repartitions the table"},
		{"PARTITION BY SYSTEM_TIME INTERVAL 1 MONTH", "PARTITION BY repartitions"},
		{"DISCARD TABLESPACE", "DISCARD/IMPORT TABLESPACE"},
		{"IMPORT TABLESPACE", "DISCARD/IMPORT TABLESPACE"},
		{"ORDER BY a", "ORDER BY"},
		{"ENGINE=MyISAM", "ENGINE=MyISAM: recast builds the new table with InnoDB only"},
		{"ADD COLUMN c INT, ENGINE Aria", "ENGINE=Aria"},
		{"ADD SYSTEM VERSIONING", "system versioning"},
		{"DROP SYSTEM VERSIONING", "system versioning"},
		{"ADD COLUMN s TIMESTAMP(6) GENERATED ALWAYS AS ROW START", "system versioning"},
		{"ADD PERIOD FOR p(s, e)", "PERIOD FOR"},
		{"ALGORITHM=FAST", "ALGORITHM=FAST is not a MariaDB algorithm"},
		{"LOCK=ALL", "LOCK=ALL is not a MariaDB lock option"},
		{"garbage text", "could not be analysed: syntax error at line 1, column 1 near \"garbage text\""},
		{"ADD COLUMN c INT,\nADD COLUMN d FOO,\n ADD COLUMN e INT", "syntax error at line 2, column 14 near \"FOO,\""},
		// positions survive the rewrites made before the error
		{"MODIFY c CHAR(1) CHARACTER SET ucs2, ALGORITHM=INPLACE, ADD d FOO", "syntax error at line 1, column 63 near \"FOO\""},
		{"WAIT 1 ADD COLUMN c INT, ADD COLUMN d INT FOO", "syntax error at line 1, column 43 near \"FOO\""},
		{"ALGORITHM=INPLACE, ADD d FOO", "syntax error at line 1, column 26 near \"FOO\""},
		{"ALGORITHM=INPLACE,\n FOO BAR", "syntax error at line 2, column 2 near \"FOO BAR\""},
		{"ADD COLUMN c INT,", "syntax error at line 1, column 18 (end of the ALTER)"},
		{", ADD COLUMN c INT", "syntax error at line 1, column 1"},
		{"ADD COLUMN c 'unterminated", "unterminated ' quote at line 1, column 14"},
		{"ADD INDEX (a", "unbalanced '('"},
		{"ADD COLUMN c INT /*M! INVISIBLE */", "executable comments"},
		{"ROW_FORMAT=PAGE", "could not be analysed: syntax error at line 1, column 12 near \"PAGE\""},
		{"ALTER TABLE t ADD COLUMN c INT", "whole statement"},
		{"alter online table t ADD COLUMN c INT", "whole statement"},
		{"SECONDARY_LOAD", "\"SECONDARY_LOAD\" is not a MariaDB ALTER TABLE specification"},
		{"CACHE", "not a MariaDB ALTER TABLE specification recast supports"},
	}
	for _, tc := range cases {
		a, err := Analyze(tc.body)
		if err == nil {
			t.Errorf("Analyze(%q) = %+v, want error containing %q", tc.body, a, tc.want)
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Cause == "" || e.Fix == "" {
			t.Errorf("Analyze(%q): error %#v is not an *Error with cause and fix", tc.body, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Analyze(%q) error:\n %v\nwant it to contain %q", tc.body, err, tc.want)
		}
		if strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "cause: ") || !strings.Contains(err.Error(), "; fix: ") {
			t.Errorf("Analyze(%q) error not one line \"cause: ...; fix: ...\": %q", tc.body, err)
		}
	}
}

func TestAnalyzeFor(t *testing.T) {
	ok := []struct{ table, stmt, body, waitOpt string }{
		{"t", "ALTER TABLE t ADD COLUMN c INT", "ADD COLUMN c INT", ""},
		{"t", "ADD COLUMN c INT", "ADD COLUMN c INT", ""},
		{"t", "alter table `t` ADD COLUMN c INT;", "ADD COLUMN c INT", ""},
		{"t", "ALTER TABLE db.t ADD COLUMN c INT", "ADD COLUMN c INT", ""},
		{"db.t", "ALTER TABLE `db`.`t` ADD COLUMN c INT", "ADD COLUMN c INT", ""},
		{"db.t", "ALTER TABLE t ADD COLUMN c INT", "ADD COLUMN c INT", ""},
		{"t", "ALTER ONLINE TABLE IF EXISTS t WAIT 3 ADD COLUMN c INT", "WAIT 3 ADD COLUMN c INT", "WAIT 3"},
		{"t", "ALTER TABLE t ALTER COLUMN c SET DEFAULT 1", "ALTER COLUMN c SET DEFAULT 1", ""},
		{"t", "ALTER COLUMN c SET DEFAULT 1", "ALTER COLUMN c SET DEFAULT 1", ""},
	}
	for _, tc := range ok {
		a, err := AnalyzeFor(tc.table, tc.stmt)
		if err != nil {
			t.Errorf("AnalyzeFor(%q, %q): %v", tc.table, tc.stmt, err)
			continue
		}
		if a.Statement != tc.body || a.Wait != tc.waitOpt {
			t.Errorf("AnalyzeFor(%q, %q): Statement %q Wait %q, want %q %q", tc.table, tc.stmt, a.Statement, a.Wait, tc.body, tc.waitOpt)
		}
	}
	bad := []struct{ table, stmt, want string }{
		{"t", "ALTER TABLE other ADD COLUMN c INT", "ALTER of `other`, but --table is `t`"},
		{"t", "ALTER TABLE T ADD COLUMN c INT", "ALTER of `T`, but --table is `t`"},
		{"db.t", "ALTER TABLE db2.t ADD COLUMN c INT", "ALTER of `db2`.`t`, but --table is `db.t`"},
		{"t", "ALTER TABLE t", "nothing after the table name"},
		{"t", "ALTER TABLE", "a table name must follow ALTER TABLE"},
		{"t", "ALTER TABLE t ADD COLUMN d FOO", "syntax error at line 1, column 28 near \"FOO\""},
		{"t", "ALTER TABLE t RENAME TO u", "RENAME TO"},
		{"t", "ALTER ONLINE IGNORE TABLE IF EXISTS t ADD UNIQUE (c)", "ALTER IGNORE TABLE: recast does not delete duplicate rows"},
		{"t", "alter ignore table t FORCE", "ALTER IGNORE TABLE"},
	}
	for _, tc := range bad {
		_, err := AnalyzeFor(tc.table, tc.stmt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AnalyzeFor(%q, %q) = %v, want error containing %q", tc.table, tc.stmt, err, tc.want)
		}
	}
}

// FuzzAnalyze checks that no body makes the analyser panic, and that the
// ghost statement never keeps ALGORITHM=/LOCK= items.
func FuzzAnalyze(f *testing.F) {
	for _, s := range []string{
		"ADD COLUMN c INT, ALGORITHM=INPLACE, LOCK=NONE",
		"ADD COLUMN (x INET4 DEFAULT (1+1) INVISIBLE, y VARCHAR(10) CHARACTER SET utf16)",
		"MODIFY c INT DEFAULT f(", "CHANGE a", "ADD", "ADD COLUMN (", "WAIT", "COMPRESSED=",
		"ADD SPATIAL", "ALTER INDEX i NOT", "PAGE_COMPRESSED=", "CHARACTER SET", "ALTER TABLE t",
		"MODIFY c INT REF_SYSTEM_ID", "ADD c INT DEFAULT", "ENGINE=InnoDB, FORCE", "DROP PRIMARY KEY;",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		a, err := Analyze(body)
		if err == nil && a.GhostStatement == "" {
			t.Errorf("Analyze(%q): empty GhostStatement", body)
		}
		_, _ = AnalyzeFor("t", body)
	})
}
