package check

import (
	"context"
	"strings"

	"github.com/recast-osc/recast/internal/dbconn"
)

// reservedVars are session variables recast sets itself and relies on.
var reservedVars = map[string]string{
	"tx_isolation":             "recast's copy runs in READ COMMITTED so that its locking reads take no gap locks",
	"transaction_isolation":    "recast's copy runs in READ COMMITTED so that its locking reads take no gap locks",
	"sql_log_bin":              "recast's writes must reach the binlog, or replicas would never get the new table's rows",
	"autocommit":               "every recast statement must commit on its own",
	"character_set_client":     "recast passes values as raw bytes in a fixed connection character set",
	"character_set_connection": "recast passes values as raw bytes in a fixed connection character set",
	"character_set_results":    "recast passes values as raw bytes in a fixed connection character set",
	"collation_connection":     "recast passes values as raw bytes in a fixed connection character set",
}

// requiredValue: --set-vars may name these, with this value only.
var requiredValue = map[string]string{
	"binlog_format":    "ROW",
	"binlog_row_image": "FULL",
}

func init() {
	Register(Check{Name: "set-vars", Order: 10, Run: checkSetVars})
}

// checkSetVars refuses --set-vars that would break recast's own sessions,
// and names that are unknown, global-only or read-only on this server.
func checkSetVars(ctx context.Context, in *Input) error {
	vars := in.Conn.SetVars
	if len(vars) == 0 {
		return nil
	}
	for _, n := range sortedKeys(vars) {
		name := strings.ToLower(n)
		if why, ok := reservedVars[name]; ok {
			return refusef("leave "+name+" out of --set-vars", "--set-vars sets %s, which recast sets itself: %s", name, why)
		}
		if want, ok := requiredValue[name]; ok && !strings.EqualFold(strings.Trim(vars[n], `'"`), want) {
			return refusef("use --set-vars "+name+"="+want+" or leave it out",
				"--set-vars sets %s=%s, but recast follows row changes and needs %s=%s", name, vars[n], name, want)
		}
	}
	if in.DB == nil {
		return nil
	}
	if err := dbconn.CheckSetVars(ctx, in.DB, vars); err != nil {
		if cause, fix, ok := strings.Cut(err.Error(), "; fix: "); ok {
			return refuse(cause, fix)
		}
		return err
	}
	return nil
}
