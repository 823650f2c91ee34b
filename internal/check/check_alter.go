package check

import (
	"context"
	"errors"
	"strings"

	"github.com/recast-osc/recast/internal/ddl"
)

func init() {
	Register(Check{Name: "alter", Order: 50, Run: checkAlter})
}

// checkAlter analyses the ALTER with a SQL parser (package ddl): it must
// parse (the error shows where it does not), be a single statement for this
// table, and hold nothing a row copy cannot do (RENAME TO, partition
// management, DISCARD/IMPORT TABLESPACE, another engine, system
// versioning). It sets in.Analysis.
func checkAlter(_ context.Context, in *Input) error {
	name := in.Table
	if !strings.Contains(in.Database, ".") {
		name = in.Database + "." + in.Table // ALTER TABLE otherdb.t is refused too
	}
	an, err := ddl.AnalyzeFor(name, in.Alter)
	var de *ddl.Error
	if errors.As(err, &de) {
		return refuse(de.Cause, de.Fix)
	}
	if err != nil {
		return err
	}
	in.Analysis = an
	return nil
}
