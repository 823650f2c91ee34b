package check

import (
	"context"
	"strings"
)

func init() {
	Register(Check{Name: "binlog", Order: 20, Run: checkBinlog})
}

// checkBinlog: recast follows the table's changes in the binlog, as full row
// images it can decode: log_bin ON, binlog_format ROW and binlog_row_image
// FULL (for the server and for recast's own sessions), no compressed events.
func checkBinlog(_ context.Context, in *Input) error {
	g, s := in.Globals, in.Session
	if !strings.EqualFold(g["log_bin"], "ON") {
		return refuse("the binary log is off (log_bin=OFF): recast follows the table's changes through the binlog",
			"restart the server with log_bin (and binlog_format=ROW, binlog_row_image=FULL); log_bin cannot be switched on at runtime")
	}
	if f := g["binlog_format"]; !strings.EqualFold(f, "ROW") {
		return refusef("SET GLOBAL binlog_format=ROW (and in the server's configuration), then reconnect the application so that its sessions log rows; "+
			"--set-vars binlog_format=ROW covers recast's own sessions only",
			"binlog_format is %s: recast needs every change to the table logged as row images (ROW)", strings.ToUpper(f))
	}
	if f, ok := s["binlog_format"]; ok && !strings.EqualFold(f, "ROW") {
		return refusef("leave binlog_format out of --set-vars, or use --set-vars binlog_format=ROW",
			"recast's own sessions run with binlog_format=%s: its writes must be logged as rows", strings.ToUpper(f))
	}
	if img := g["binlog_row_image"]; !strings.EqualFold(img, "FULL") {
		return refusef("run SET GLOBAL binlog_row_image=FULL (and in the server's configuration); reconnect the application so its sessions pick it up",
			"binlog_row_image is %s: recast applies changes from full row images", strings.ToUpper(img))
	}
	if img, ok := s["binlog_row_image"]; ok && !strings.EqualFold(img, "FULL") {
		return refusef("leave binlog_row_image out of --set-vars",
			"recast's own sessions run with binlog_row_image=%s: recast needs FULL", strings.ToUpper(img))
	}
	if strings.EqualFold(g["log_bin_compress"], "ON") {
		return refuse("log_bin_compress is ON: recast cannot read compressed binlog events",
			"run SET GLOBAL log_bin_compress=OFF (and in the server's configuration)")
	}
	// MySQL: compressed transaction payloads, and partial JSON updates (a
	// diff instead of the value), per session and global.
	for _, m := range []map[string]string{g, s} {
		if strings.EqualFold(m["binlog_transaction_compression"], "ON") {
			return refuse("binlog_transaction_compression is ON: recast cannot read compressed transaction payloads",
				"run SET GLOBAL binlog_transaction_compression=OFF (and in the server's configuration; sessions that set it themselves too)")
		}
		if strings.Contains(strings.ToUpper(m["binlog_row_value_options"]), "PARTIAL_JSON") {
			return refuse("binlog_row_value_options is PARTIAL_JSON: JSON updates would be logged as diffs, which recast cannot apply",
				"run SET GLOBAL binlog_row_value_options='' (and in the server's configuration)")
		}
	}
	return nil
}
