package migration

import (
	"reflect"
	"testing"

	"github.com/recast-osc/recast/internal/table"
)

// TestNewIndexes: an index counts as built by an in-place ALTER when it is
// new, or when a column of it changes type or collation (the index is
// rebuilt); an untouched one does not.
func TestNewIndexes(t *testing.T) {
	tbl := func(kColl, kType string, idx ...table.Index) *table.Table {
		return &table.Table{
			Columns: []table.Column{
				{Name: "id", DataType: "int", ColumnType: "int(11)"},
				{Name: "k", DataType: "varchar", ColumnType: kType, Charset: "utf8mb4", Collation: kColl},
				{Name: "v", DataType: "int", ColumnType: "int(11)"},
			},
			Indexes: idx,
		}
	}
	pk := table.Index{Name: "PRIMARY", Unique: true, Columns: []string{"id"}}
	uk := table.Index{Name: "uk", Unique: true, Columns: []string{"k"}, Shape: "/A/BTREE/;"}
	iv := table.Index{Name: "iv", Columns: []string{"v"}}
	before := tbl("utf8mb4_bin", "varchar(10)", pk, uk)
	for _, tc := range []struct {
		name  string
		after *table.Table
		want  []string
	}{
		{"unchanged", tbl("utf8mb4_bin", "varchar(10)", pk, uk), nil},
		{"dropped index", tbl("utf8mb4_bin", "varchar(10)", pk), nil},
		{"new index", tbl("utf8mb4_bin", "varchar(10)", pk, uk, iv), []string{"`iv`"}},
		{"collation of an indexed column", tbl("utf8mb4_general_ci", "varchar(10)", pk, uk), []string{"`uk`"}},
		{"type of an indexed column", tbl("utf8mb4_bin", "varchar(20)", pk, uk), []string{"`uk`"}},
		{"made unique", tbl("utf8mb4_bin", "varchar(10)", pk, table.Index{Name: "uk", Columns: []string{"k"}}), []string{"`uk`"}},
		// Dropped and added again under its name with another prefix,
		// order or type: built (the probe said NOCOPY all the same).
		{"other prefix", tbl("utf8mb4_bin", "varchar(10)", pk, table.Index{Name: "uk", Unique: true, Columns: []string{"k"}, Shape: "4/A/BTREE/;"}), []string{"`uk`"}},
		{"descending", tbl("utf8mb4_bin", "varchar(10)", pk, table.Index{Name: "uk", Unique: true, Columns: []string{"k"}, Shape: "/D/BTREE/;"}), []string{"`uk`"}},
	} {
		if got := newIndexes(before, tc.after); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
