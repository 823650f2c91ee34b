package check

import "context"

func init() {
	Register(Check{Name: "system-versioning", Order: 45, CopyOnly: true, Run: checkVersioning})
}

// checkVersioning refuses MariaDB system-versioned tables: a copy holds the
// current rows only, so the table's history would be lost (pt-osc 3.2.1
// drops it silently).
func checkVersioning(_ context.Context, in *Input) error {
	if in.Source.TableType != "SYSTEM VERSIONED" {
		return nil
	}
	return refusef("change it with a plain ALTER TABLE (MariaDB keeps the history; set system_versioning_alter_history=KEEP), or remove versioning first if its history may go",
		"%s is system-versioned: a copy would lose its history (row versions), so recast refuses it", in.quotedTable())
}
