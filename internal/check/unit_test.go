package check

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
)

func TestOrder(t *testing.T) {
	var got []string
	orders := map[int]bool{}
	for _, c := range Checks() {
		got = append(got, c.Name)
		if orders[c.Order] {
			t.Errorf("order %d used twice", c.Order)
		}
		orders[c.Order] = true
	}
	want := []string{"set-vars", "binlog", "privileges", "table", "system-versioning", "alter", "triggers",
		"foreign-keys", "check-constraint-names", "data-directory", "lock", "helper-tables", "chunk-key", "not-null", "narrowing", "number-text", "numeric-range", "key-type", "unique"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("checks run in order\n%v\nwant\n%v", got, want)
	}
}

func TestErrorIsOneLine(t *testing.T) {
	e := &Error{Check: "x", Cause: "the cause", Fix: "the fix"}
	if e.Error() != "the cause; fix: the fix" {
		t.Errorf("Error() = %q", e.Error())
	}
}

// TestRunStopsAtFirstFailure: Run returns the first refusal, tagged with the
// check's name, and runs nothing after it.
func TestRunStopsAtFirstFailure(t *testing.T) {
	in := &Input{Globals: map[string]string{"log_bin": "OFF"}, Session: map[string]string{}}
	err := Run(context.Background(), in)
	var ce *Error
	if !errors.As(err, &ce) || ce.Check != "binlog" {
		t.Fatalf("Run = %v, want the binlog check's refusal", err)
	}
}

// TestBinlogCheck fakes the server's variables: log_bin cannot be switched
// on or off at runtime, so this is where "binlog off" is tested.
func TestBinlogCheck(t *testing.T) {
	good := map[string]string{"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL", "log_bin_compress": "OFF"}
	for _, tc := range []struct {
		name     string
		global   map[string]string
		session  map[string]string
		keywords []string
		wantPass bool
	}{
		{name: "ok", wantPass: true},
		{name: "session row", session: map[string]string{"binlog_format": "ROW"}, wantPass: true},
		{name: "binlog off", global: map[string]string{"log_bin": "OFF"}, keywords: []string{"binary log is off", "log_bin", "restart the server"}},
		{name: "statement", global: map[string]string{"binlog_format": "STATEMENT"}, keywords: []string{"binlog_format is STATEMENT", "SET GLOBAL binlog_format=ROW", "--set-vars binlog_format=ROW"}},
		{name: "mixed", global: map[string]string{"binlog_format": "MIXED"}, keywords: []string{"binlog_format is MIXED"}},
		{name: "session statement", session: map[string]string{"binlog_format": "STATEMENT"}, keywords: []string{"recast's own sessions run with binlog_format=STATEMENT"}},
		{name: "minimal", global: map[string]string{"binlog_row_image": "MINIMAL"}, keywords: []string{"binlog_row_image is MINIMAL", "SET GLOBAL binlog_row_image=FULL"}},
		{name: "noblob", global: map[string]string{"binlog_row_image": "NOBLOB"}, keywords: []string{"binlog_row_image is NOBLOB"}},
		{name: "compressed", global: map[string]string{"log_bin_compress": "ON"}, keywords: []string{"log_bin_compress is ON", "SET GLOBAL log_bin_compress=OFF"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{Globals: map[string]string{}, Session: map[string]string{}}
			for k, v := range good {
				in.Globals[k] = v
			}
			for k, v := range tc.global {
				in.Globals[k] = v
			}
			for k, v := range tc.session {
				in.Session[k] = v
			}
			err := checkBinlog(context.Background(), in)
			if tc.wantPass {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			assertRefusal(t, err, tc.keywords...)
		})
	}
}

func assertRefusal(t *testing.T, err error, keywords ...string) {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("want a refusal, got %v", err)
	}
	if ce.Fix == "" {
		t.Errorf("refusal without a fix: %v", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("message is not one line: %q", msg)
	}
	for _, k := range keywords {
		if !strings.Contains(msg, k) {
			t.Errorf("message lacks %q: %s", k, msg)
		}
	}
}

func TestParseSetVars(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
		err  string
	}{
		{in: "", want: map[string]string{}},
		{in: "binlog_format=row", want: map[string]string{"binlog_format": "row"}},
		{in: " Binlog_Format = ROW , innodb_lock_wait_timeout=3 ", want: map[string]string{"binlog_format": "ROW", "innodb_lock_wait_timeout": "3"}},
		{in: "a=b,c='x y'", want: map[string]string{"a": "b", "c": "'x y'"}},
		{in: `c="x,y",d='it''s',e='a\'b'`, want: map[string]string{"c": "'x,y'", "d": "'it''s'", "e": "'a''b'"}},
		{in: "long_query_time=0.5,sql_safe_updates=OFF,", want: map[string]string{"long_query_time": "0.5", "sql_safe_updates": "OFF"}},
		{in: "novalue", err: "has no '='"},
		{in: "a=", err: "has no value"},
		{in: "a b=1", err: "not a variable name"},
		{in: "1a=1", err: "not a variable name"},
		{in: "a=1,A=2", err: "given twice"},
		{in: "a=1;DROP TABLE t", err: "quote it"},
		{in: "a='x", err: "unterminated"},
		{in: "a='x'y", err: "unexpected"},
		{in: "timeout=1", err: "not a server variable"},
		{in: "charset=latin1", err: "not a server variable"},
	} {
		got, err := ParseSetVars(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSetVars(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseSetVars(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestSetVarsReserved: variables recast sets itself cannot be overridden.
func TestSetVarsReserved(t *testing.T) {
	for _, tc := range []struct {
		vars     map[string]string
		keywords []string
	}{
		{map[string]string{"sql_log_bin": "0"}, []string{"sets sql_log_bin", "replicas"}},
		{map[string]string{"binlog_format": "STATEMENT"}, []string{"binlog_format=STATEMENT", "needs binlog_format=ROW"}},
		{map[string]string{"binlog_row_image": "'minimal'"}, []string{"needs binlog_row_image=FULL"}},
	} {
		err := checkSetVars(context.Background(), &Input{Conn: dbconn.Config{SetVars: tc.vars}})
		assertRefusal(t, err, tc.keywords...)
	}
	if err := checkSetVars(context.Background(), &Input{Conn: dbconn.Config{SetVars: map[string]string{"binlog_format": "row"}}}); err != nil {
		t.Errorf("binlog_format=row refused: %v", err)
	}
	// sql_mode and time_zone are the semantics of the migration (the
	// server's globals unless set): the user may choose them.
	for _, v := range []map[string]string{{"time_zone": "'+01:00'"}, {"sql_mode": "'TRADITIONAL'"}} {
		if err := checkSetVars(context.Background(), &Input{Conn: dbconn.Config{SetVars: v}}); err != nil {
			t.Errorf("%v refused: %v", v, err)
		}
	}
}

func TestParseGrant(t *testing.T) {
	for _, tc := range []struct {
		line string
		want grant
		ok   bool
	}{
		{"GRANT ALL PRIVILEGES ON *.* TO `recast`@`127.0.0.1` IDENTIFIED BY PASSWORD '*E8D5' WITH GRANT OPTION", grant{privs: []string{"ALL"}, global: true}, true},
		{"GRANT PROCESS, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `lim`@`127.0.0.1`", grant{privs: []string{"PROCESS", "REPLICATION SLAVE", "REPLICATION CLIENT"}, global: true}, true},
		{"GRANT SELECT, INSERT ON `d1`.* TO `lim`@`127.0.0.1`", grant{privs: []string{"SELECT", "INSERT"}, db: "d1"}, true},
		{"GRANT SELECT ON `d\\_%`.* TO `lim`@`%`", grant{privs: []string{"SELECT"}, db: `d\_%`}, true},
		{"GRANT LOCK TABLES, CREATE TEMPORARY TABLES ON `we``ird`.* TO `u`@`h`", grant{privs: []string{"LOCK TABLES", "CREATE TEMPORARY TABLES"}, db: "we`ird"}, true},
		{"GRANT SELECT (`a`, `b`), INSERT ON `d1`.* TO `u`@`h`", grant{privs: []string{"INSERT"}, db: "d1"}, true},
		{"GRANT UPDATE (`c`) ON `d1`.`t` TO `lim`@`127.0.0.1`", grant{}, false},
		{"GRANT EXECUTE ON PROCEDURE `d1`.`p` TO `u`@`h`", grant{}, false},
		{"GRANT `r1` TO `lim`@`127.0.0.1`", grant{role: true}, true},
		{"GRANT PROXY ON ''@'%' TO 'u'@'h'", grant{}, false},
		{"SET DEFAULT ROLE `r1` FOR `lim`@`127.0.0.1`", grant{}, false},
	} {
		got, ok := parseGrant(tc.line)
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseGrant(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLikeMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"shop", "shop", true}, {"shop", "shop2", false}, {"shop%", "shop2", true}, {"s_op", "shop", true},
		{`s\_op`, "shop", false}, {`s\_op`, "s_op", true}, {"%", "", true}, {"a%b", "axxb", true}, {"a%b", "axxc", false},
	} {
		if got := likeMatch(tc.pattern, tc.name); got != tc.want {
			t.Errorf("likeMatch(%q, %q) = %v", tc.pattern, tc.name, got)
		}
	}
}

func TestMissingPrivileges(t *testing.T) {
	parse := func(lines ...string) []grant {
		var gs []grant
		for _, l := range lines {
			if g, ok := parseGrant(l); ok {
				gs = append(gs, g)
			}
		}
		return gs
	}
	g, s := missingPrivileges(parse("GRANT ALL PRIVILEGES ON *.* TO `a`@`b`"), "d")
	if len(g)+len(s) != 0 {
		t.Errorf("ALL PRIVILEGES: missing %v %v", g, s)
	}
	g, s = missingPrivileges(parse(
		"GRANT REPLICATION SLAVE ON *.* TO `a`@`b`",
		"GRANT ALL PRIVILEGES ON `d`.* TO `a`@`b`"), "d")
	if !reflect.DeepEqual(g, []string{"REPLICATION CLIENT", "PROCESS"}) || len(s) != 0 {
		t.Errorf("missing %v %v", g, s)
	}
	g, s = missingPrivileges(parse(
		"GRANT PROCESS, REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO `a`@`b`",
		"GRANT INSERT, DELETE ON `d%`.* TO `a`@`b`",
		"GRANT ALL ON `other`.* TO `a`@`b`",
		"GRANT ALTER ON `d`.`t` TO `a`@`b`"), "d1")
	if len(g) != 0 || !reflect.DeepEqual(s, []string{"CREATE", "DROP", "ALTER", "LOCK TABLES", "CREATE TEMPORARY TABLES"}) {
		t.Errorf("missing %v %v", g, s)
	}
}

func TestAccountLiteral(t *testing.T) {
	for in, want := range map[string]string{
		"lim@127.0.0.1": "'lim'@'127.0.0.1'",
		"o'neil@%":      "'o''neil'@'%'",
		"a@b@localhost": "'a@b'@'localhost'",
		"@localhost":    "''@'localhost'",
	} {
		if got := accountLiteral(in); got != want {
			t.Errorf("accountLiteral(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestLockName(t *testing.T) {
	if got := LockName("shop", "orders"); got != "recast:shop.orders" {
		t.Errorf("LockName = %q", got)
	}
	long := LockName(strings.Repeat("d", 64), "t")
	if len(long) > 64 || !strings.HasPrefix(long, "recast:") || long == LockName(strings.Repeat("d", 64), "u") {
		t.Errorf("long LockName = %q (%d)", long, len(long))
	}
}

// TestPlacedIn: the DATA/INDEX DIRECTORY options of SHOW CREATE TABLE texts,
// in table options and in MySQL's executable partition comments, not in
// names or comments.
func TestPlacedIn(t *testing.T) {
	for create, want := range map[string]string{
		"CREATE TABLE `t` (\n  `id` int NOT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 DATA DIRECTORY='/disk2/'":                        "DATA DIRECTORY='/disk2/'",
		"CREATE TABLE `t` (\n  `id` int NOT NULL\n) ENGINE=InnoDB\n/*!50100 PARTITION BY HASH (`id`)\n(PARTITION p0 DATA DIRECTORY = '/d/p0' ENGINE = InnoDB) */": "DATA DIRECTORY='/d/p0'",
		"CREATE TABLE `t` (\n  `id` int NOT NULL\n) ENGINE=MyISAM INDEX DIRECTORY='/i/'":                                                                          "INDEX DIRECTORY='/i/'",
		"CREATE TABLE `t` (\n  `data` int NOT NULL COMMENT 'DATA DIRECTORY=x',\n  `directory` int\n) ENGINE=InnoDB COMMENT='data directory'":                      "",
		"CREATE TABLE `t` (\n  `id` int NOT NULL\n) ENGINE=InnoDB":                                                                                                "",
	} {
		got, err := placedIn(create)
		if err != nil || got != want {
			t.Errorf("placedIn(%q) = %q, %v; want %q", create, got, err, want)
		}
	}
}

// TestKeyConversion: which conversions of a unique key's column keep values
// one to one (""), and the reason given for the others.
func TestKeyConversion(t *testing.T) {
	col := func(dataType, columnType string) table.Column {
		c := table.Column{DataType: dataType, ColumnType: columnType, Unsigned: strings.Contains(columnType, "unsigned")}
		if table.IsStringType(dataType) && !table.IsBinaryType(dataType) {
			c.Charset, c.Collation = "utf8mb4", "utf8mb4_bin"
		}
		return c
	}
	for _, tc := range []struct {
		from, to [2]string
		dst      bool
		want     string // "" or a part of the reason
	}{
		{[2]string{"int", "int(11)"}, [2]string{"bigint", "bigint(20)"}, false, ""},
		{[2]string{"int", "int unsigned"}, [2]string{"bigint", "bigint"}, false, ""},
		{[2]string{"bigint", "bigint"}, [2]string{"int", "int"}, false, ""},
		{[2]string{"bigint", "bigint"}, [2]string{"smallint", "smallint unsigned"}, false, ""},
		{[2]string{"datetime", "datetime"}, [2]string{"timestamp", "timestamp"}, true, "daylight-saving"},
		{[2]string{"timestamp", "timestamp(3)"}, [2]string{"datetime", "datetime(3)"}, true, "daylight-saving"},
		{[2]string{"timestamp", "timestamp(3)"}, [2]string{"timestamp", "timestamp(6)"}, true, ""},
		{[2]string{"date", "date"}, [2]string{"timestamp", "timestamp"}, false, ""},
		{[2]string{"date", "date"}, [2]string{"timestamp", "timestamp"}, true, "otherwise than one to one"},
		{[2]string{"int", "int"}, [2]string{"decimal", "decimal(10,0)"}, false, ""},
		{[2]string{"int", "int"}, [2]string{"decimal", "decimal(9,2)"}, false, ""},
		{[2]string{"decimal", "decimal(10,2)"}, [2]string{"decimal", "decimal(12,4)"}, false, ""},
		{[2]string{"decimal", "decimal(10,4)"}, [2]string{"decimal", "decimal(10,2)"}, false, "rounds its values to 2 decimals"},
		{[2]string{"decimal", "decimal(10,2)"}, [2]string{"bigint", "bigint"}, false, "rounds its values to 0 decimals"},
		{[2]string{"decimal", "decimal(10,2)"}, [2]string{"double", "double"}, false, "DOUBLE's 53-bit"},
		{[2]string{"mediumint", "mediumint unsigned"}, [2]string{"float", "float"}, false, ""},
		{[2]string{"int", "int"}, [2]string{"float", "float"}, false, "FLOAT's 24-bit"},
		{[2]string{"int", "int unsigned"}, [2]string{"double", "double"}, false, ""},
		{[2]string{"bigint", "bigint"}, [2]string{"real", "double"}, false, "DOUBLE's 53-bit"},
		{[2]string{"bigint", "bigint"}, [2]string{"varchar", "varchar(30)"}, false, ""},
		{[2]string{"int", "int"}, [2]string{"datetime", "datetime"}, false, "otherwise than one to one"},
		{[2]string{"int", "int"}, [2]string{"year", "year"}, false, "otherwise than one to one"},
		{[2]string{"year", "year(4)"}, [2]string{"smallint", "smallint"}, false, ""},
		{[2]string{"year", "year"}, [2]string{"date", "date"}, false, "years otherwise"},
		{[2]string{"datetime", "datetime(6)"}, [2]string{"datetime", "datetime"}, false, "rounds fractional seconds to 0 digits"},
		{[2]string{"datetime", "datetime(3)"}, [2]string{"datetime", "datetime(6)"}, false, ""},
		{[2]string{"timestamp", "timestamp(6)"}, [2]string{"datetime", "datetime(2)"}, false, "to 2 digits"},
		{[2]string{"datetime", "datetime"}, [2]string{"timestamp", "timestamp"}, false, ""},
		{[2]string{"time", "time(3)"}, [2]string{"time", "time(1)"}, false, "to 1 digits"},
		{[2]string{"date", "date"}, [2]string{"datetime", "datetime"}, false, ""},
		{[2]string{"datetime", "datetime"}, [2]string{"date", "date"}, false, "dates and times otherwise"},
		{[2]string{"time", "time"}, [2]string{"datetime", "datetime"}, false, "dates and times otherwise"},
		{[2]string{"datetime", "datetime"}, [2]string{"varchar", "varchar(30)"}, false, "dates and times otherwise"},
		{[2]string{"varchar", "varchar(10)"}, [2]string{"int", "int"}, false, "reads text as a number"},
		{[2]string{"varbinary", "varbinary(10)"}, [2]string{"date", "date"}, false, "reads text as a number or a date"},
		{[2]string{"varchar", "varchar(10)"}, [2]string{"varchar", "varchar(20)"}, false, ""},
		{[2]string{"varbinary", "varbinary(16)"}, [2]string{"binary", "binary(16)"}, false, "pads values with 0x00"},
		{[2]string{"binary", "binary(8)"}, [2]string{"binary", "binary(16)"}, false, "pads values with 0x00"},
		{[2]string{"char", "char(8)"}, [2]string{"binary", "binary(8)"}, false, "pads values with 0x00"},
		{[2]string{"binary", "binary(16)"}, [2]string{"binary", "binary(16)"}, false, ""},
		{[2]string{"binary", "binary(16)"}, [2]string{"varbinary", "varbinary(16)"}, false, ""},
		{[2]string{"bigint", "bigint"}, [2]string{"binary", "binary(24)"}, false, ""},
		{[2]string{"decimal", "decimal(10,2)"}, [2]string{"binary", "binary(16)"}, false, "pads values with 0x00"},
		{[2]string{"year", "year"}, [2]string{"binary", "binary(8)"}, false, "pads values with 0x00"},
		{[2]string{"date", "date"}, [2]string{"binary", "binary(16)"}, false, "pads values with 0x00"},
		{[2]string{"varchar", "varchar(10)"}, [2]string{"set", "set('a','b')"}, false, "reads text as a member"},
		{[2]string{"char", "char(1)"}, [2]string{"enum", "enum('a','b')"}, false, "reads text as a member"},
		{[2]string{"enum", "enum('a','b')"}, [2]string{"tinyint", "tinyint"}, false, ""},
		{[2]string{"float", "float"}, [2]string{"float", "float"}, false, ""},
		{[2]string{"float", "float"}, [2]string{"double", "double"}, false, "otherwise than one to one"},
		{[2]string{"float", "float"}, [2]string{"float", "float(7,4)"}, false, "otherwise than one to one"},
		{[2]string{"bit", "bit(8)"}, [2]string{"bit", "bit(8)"}, false, ""},
		{[2]string{"bit", "bit(8)"}, [2]string{"bit", "bit(4)"}, false, "otherwise than one to one"},
	} {
		got := KeyConversion(col(tc.from[0], tc.from[1]), col(tc.to[0], tc.to[1]), tc.dst)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s -> %s (dst %v): %q, want %q", tc.from[1], tc.to[1], tc.dst, got, tc.want)
		}
	}
}
