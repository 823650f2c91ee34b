package migration

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
)

// Conversions the applier must spell out. The copy converts with INSERT ...
// SELECT under the server's semantics (sql_mode, time_zone), exactly as the
// server's own ALTER does. The applier writes binlog images as literals, in
// a UTC session (the binlog renders TIMESTAMPs in UTC), so a conversion that
// depends on the time zone (a TIMESTAMP read as local time, a local time
// stored as a TIMESTAMP) is written as an expression that converts in the
// migration's zone: the row then equals what INSERT ... SELECT writes.

// zoneExprs returns, per column pair (and per key column), the applier's
// write template, "" for a plain value. It refuses a conversion to TIMESTAMP
// from a type whose literal the applier cannot convert in the zone the same
// way (character or numeric columns) unless the zone is UTC.
func (m *migrator) zoneExprs(p *Plan) (exprs, keyExprs []string, err error) {
	if m.sem.UTC {
		return nil, nil, nil
	}
	expr := func(src, gh string) (string, error) {
		sc := m.source.Columns[m.source.ColumnIndex(src)]
		gi := p.Ghost.ColumnIndex(gh)
		if gi < 0 {
			return "", nil
		}
		gc := p.Ghost.Columns[gi]
		return zoneExpr(sc, gc, m.sem.TimeZone)
	}
	for _, pr := range p.Pairs {
		e, err := expr(pr.Source, pr.Ghost)
		if err != nil {
			return nil, nil, err
		}
		exprs = append(exprs, e)
	}
	for i, k := range p.KeySource {
		e, err := expr(k, p.KeyGhost[i])
		if err != nil {
			return nil, nil, err
		}
		keyExprs = append(keyExprs, e)
	}
	return exprs, keyExprs, nil
}

// zoneExpr is one column's template (see zoneExprs).
func zoneExpr(sc, gc table.Column, zone string) (string, error) {
	srcTS, ghTS := sc.DataType == "timestamp", gc.DataType == "timestamp"
	if srcTS == ghTS {
		return "", nil
	}
	z := dbconn.QuoteString(zone)
	if srcTS {
		// The server renders the TIMESTAMP in its zone, then converts that.
		d := fmt.Sprintf("CAST(? AS DATETIME(%d))", fsp(sc))
		return "COALESCE(CONVERT_TZ(" + d + ", '+00:00', " + z + "), " + d + ")", nil
	}
	switch sc.DataType {
	case "datetime", "date":
		d := fmt.Sprintf("CAST(? AS DATETIME(%d))", fsp(sc))
		return "COALESCE(CONVERT_TZ(" + d + ", " + z + ", '+00:00'), " + d + ")", nil
	}
	return "", fmt.Errorf("refused: column %s changes from %s to %s, which the server converts in its time zone (%s) and recast's applier cannot reproduce for a %s; fix: convert it in two steps (to DATETIME first), or run with --set-vars time_zone='+00:00' if UTC is what you want",
		table.QuoteIdent(sc.Name), sc.ColumnType, gc.ColumnType, zone, sc.DataType)
}

// fsp is a temporal column's fractional-seconds precision.
func fsp(c table.Column) int {
	_, rest, ok := strings.Cut(c.ColumnType, "(")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSuffix(strings.Fields(rest)[0], ")"))
	if err != nil {
		return 0
	}
	return n
}
