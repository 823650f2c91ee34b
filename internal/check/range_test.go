package check

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/testutil"
)

func TestNumericRangeArithmetic(t *testing.T) {
	for _, tc := range []struct {
		col      table.Column
		min, max string
	}{
		{table.Column{DataType: "tinyint", ColumnType: "tinyint(4)"}, "-128", "127"},
		{table.Column{DataType: "tinyint", ColumnType: "tinyint(3) unsigned", Unsigned: true}, "0", "255"},
		{table.Column{DataType: "mediumint", ColumnType: "mediumint(9)"}, "-8388608", "8388607"},
		{table.Column{DataType: "bigint", ColumnType: "bigint(20)"}, "-9223372036854775808", "9223372036854775807"},
		{table.Column{DataType: "bigint", ColumnType: "bigint(20) unsigned", Unsigned: true}, "0", "18446744073709551615"},
		{table.Column{DataType: "decimal", ColumnType: "decimal(6,2)"}, "-9999.99", "9999.99"},
		{table.Column{DataType: "decimal", ColumnType: "decimal(5,0) unsigned", Unsigned: true}, "0", "99999"},
		{table.Column{DataType: "decimal", ColumnType: "decimal(3,3)"}, "-0.999", "0.999"},
	} {
		r, ok := numericRange(tc.col)
		if !ok || r.minText() != tc.min || r.maxText() != tc.max {
			t.Errorf("%s: %v %s..%s, want %s..%s", tc.col.ColumnType, ok, r.minText(), r.maxText(), tc.min, tc.max)
		}
	}
	for _, c := range []table.Column{{DataType: "double", ColumnType: "double"}, {DataType: "varchar", ColumnType: "varchar(5)"}, {DataType: "decimal", ColumnType: "decimal"}} {
		if _, ok := numericRange(c); ok {
			t.Errorf("%s has a numeric range", c.ColumnType)
		}
	}
	r, _ := numericRange(table.Column{DataType: "decimal", ColumnType: "decimal(4,2)"})
	for v, want := range map[string]bool{"99.994": true, "99.995": false, "-99.994": true, "-99.995": false, "0.001": true} {
		x, _ := new(big.Rat).SetString(v)
		if got := r.holds(x); got != want {
			t.Errorf("decimal(4,2) holds %s: %v, want %v", v, got, want)
		}
	}
}

// TestNumericRangeOracle: for narrowing ALTERs over given values, the
// checks refuse exactly when the server's own ALTER fails under a strict
// sql_mode, and the refusal names the column, the value and a row.
func TestNumericRangeOracle(t *testing.T) {
	mysql := testutil.Server(t).MySQL()
	for _, tc := range []struct {
		from   string
		values []string
		to     string
		index  bool   // index the column
		maria  bool   // MariaDB only (UNSIGNED DECIMAL is deprecated on MySQL)
		row    string // the row the refusal must name, if set
	}{
		// Neighbours equal as DOUBLEs: the example must hold the exact value
		// (the MIN, 18446744073709551614, in row 11).
		{from: "BIGINT UNSIGNED", values: []string{"18446744073709551615", "18446744073709551614"}, to: "BIGINT", row: "id=11"},
		{from: "INT", values: []string{"1", "70000"}, to: "SMALLINT"},
		{from: "INT", values: []string{"1", "70000"}, to: "SMALLINT", index: true},
		{from: "INT", values: []string{"-32768", "32767"}, to: "SMALLINT"},
		{from: "INT", values: []string{"-32769", "5"}, to: "SMALLINT"},
		{from: "INT", values: []string{"-1", "5"}, to: "INT UNSIGNED"},
		{from: "INT", values: []string{"0", "5", "NULL"}, to: "INT UNSIGNED"},
		{from: "INT UNSIGNED", values: []string{"4294967295"}, to: "INT"},
		{from: "INT UNSIGNED", values: []string{"2147483647"}, to: "INT"},
		{from: "BIGINT UNSIGNED", values: []string{"18446744073709551615"}, to: "BIGINT"},
		{from: "BIGINT", values: []string{"-9223372036854775808"}, to: "BIGINT UNSIGNED", index: true},
		{from: "MEDIUMINT UNSIGNED", values: []string{"16777215"}, to: "MEDIUMINT"},
		{from: "SMALLINT", values: []string{"NULL"}, to: "TINYINT"},
		{from: "SMALLINT", values: nil, to: "TINYINT"},
		{from: "DECIMAL(10,2)", values: []string{"12345.67"}, to: "DECIMAL(6,2)"},
		{from: "DECIMAL(10,2)", values: []string{"-12345.67"}, to: "DECIMAL(6,2)"},
		{from: "DECIMAL(10,2)", values: []string{"9999.99", "-9999.99"}, to: "DECIMAL(6,2)"},
		{from: "DECIMAL(10,3)", values: []string{"99.996"}, to: "DECIMAL(4,2)"},
		{from: "DECIMAL(10,3)", values: []string{"99.994"}, to: "DECIMAL(4,2)"},
		{from: "DECIMAL(10,3)", values: []string{"-99.995"}, to: "DECIMAL(4,2)"},
		{from: "DECIMAL(6,1)", values: []string{"127.4"}, to: "TINYINT"},
		{from: "DECIMAL(6,1)", values: []string{"127.5"}, to: "TINYINT"},
		{from: "DECIMAL(6,1)", values: []string{"-128.5"}, to: "TINYINT"},
		{from: "INT", values: []string{"100000"}, to: "DECIMAL(7,2)"},
		{from: "INT", values: []string{"99999", "-99999"}, to: "DECIMAL(7,2)"},
		{from: "TINYINT", values: []string{"-5"}, to: "DECIMAL(5,2) UNSIGNED", maria: true},
		{from: "DECIMAL(8,3)", values: []string{"-0.4"}, to: "INT UNSIGNED"}, // MySQL: 0; MariaDB: refused
		{from: "DECIMAL(8,3)", values: []string{"-0.499", "3"}, to: "TINYINT UNSIGNED", index: true},
		{from: "DECIMAL(8,3)", values: []string{"-0.001"}, to: "DECIMAL(5,2) UNSIGNED"},
		{from: "DECIMAL(8,3)", values: []string{"-0.5"}, to: "INT UNSIGNED"},
		{from: "DECIMAL(8,3)", values: []string{"-128.4", "127.49"}, to: "TINYINT"},
		{from: "DECIMAL(8,3)", values: []string{"-0.001"}, to: "DECIMAL(5,2) UNSIGNED", maria: true},
		{from: "DECIMAL(8,3)", values: []string{"0.004"}, to: "DECIMAL(5,2) UNSIGNED", maria: true},
	} {
		name := fmt.Sprintf("%s %v to %s", tc.from, tc.values, tc.to)
		if tc.index {
			name += " indexed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if tc.maria && mysql {
				t.Skip("MariaDB only")
			}
			schema := testutil.NewSchema(t)
			db := testutil.DB(t, schema)
			idx := ""
			if tc.index {
				idx = ", KEY kc (c)"
			}
			testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, c "+tc.from+" NULL"+idx+")")
			for i, v := range tc.values {
				testutil.Exec(t, db, fmt.Sprintf("INSERT INTO t VALUES (%d, %s)", 10+i, v))
			}
			alter := "MODIFY c " + tc.to + " NULL"
			in := newInput(t, schema, "t", alter)
			cerr := Run(ctxFor(t), in)
			in.Release()
			var ce *Error
			refused := errors.As(cerr, &ce) && ce.Check == "numeric-range"
			if cerr != nil && !refused {
				t.Fatalf("checks: %v", cerr)
			}

			// The oracle: the server's ALTER under a strict sql_mode, on a
			// copy of the table.
			ctx := context.Background()
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			testutil.Exec(t, db, "CREATE TABLE o LIKE t", "INSERT INTO o SELECT * FROM t")
			if _, err := conn.ExecContext(ctx, "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'"); err != nil {
				t.Fatal(err)
			}
			_, nerr := conn.ExecContext(ctx, "ALTER TABLE o "+alter)
			if _, err := conn.ExecContext(ctx, "SET SESSION sql_mode = DEFAULT"); err != nil {
				t.Fatal(err)
			}
			if refused != (nerr != nil) {
				t.Fatalf("recast refused: %v (%v); the server's ALTER failed: %v (%v)", refused, cerr, nerr != nil, nerr)
			}
			if refused {
				t.Log(cerr)
				msg := cerr.Error()
				if !strings.Contains(msg, "column `c`") || !strings.Contains(msg, "the row id=") || strings.Count(msg, "\n") > 0 {
					t.Errorf("refusal does not name the column and a row: %s", msg)
				}
				found := false
				for _, v := range tc.values {
					if strings.Contains(msg, "hold "+strings.TrimLeft(v, "+")) {
						found = true
					}
				}
				if !found {
					t.Errorf("refusal does not name the offending value (%v): %s", tc.values, msg)
				}
				if tc.row != "" && !strings.Contains(msg, "the row "+tc.row+";") {
					t.Errorf("refusal does not name the row %s: %s", tc.row, msg)
				}
			}
		})
	}
}
