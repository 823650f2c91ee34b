package migration

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/sqltok"
	"github.com/recast-osc/recast/internal/table"
)

// Values the server computes while rows are written to the new table, and
// that recast's writes would make differ from the server's own ALTER:
//
//   - a new AUTO_INCREMENT column: the ALTER numbers the rows once, in its
//     copy order; the copy numbers them in its chunks' commit order, and
//     every row the applier writes again (REPLACE, DELETE + INSERT) gets a
//     new number;
//   - a new column whose DEFAULT takes a sequence's next value: the same;
//   - in a zone other than UTC, a new column whose DEFAULT, or a stored or
//     indexed generated column (or a functional key part) whose expression,
//     depends on the session's time zone: the applier's sessions run in UTC
//     (binlog images carry TIMESTAMPs in UTC), the copy's and the ALTER's in
//     the server's zone. (A TIMESTAMP column's CURRENT_TIMESTAMP is the same
//     instant in every zone.)
//
// The table's definition is read from SHOW CREATE TABLE, which prints
// defaults and expressions unambiguously (SHOW COLUMNS prints the string
// 'NULL' as NULL) and works for the dry run's temporary table too.

// zoneFuncs: functions whose result depends on the session's time zone.
var zoneFuncs = regexp.MustCompile(`\b(now|current_timestamp|localtime|localtimestamp|sysdate|curdate|current_date|curtime|current_time|from_unixtime|unix_timestamp|convert_tz)\b`)

// instantFuncs: the current instant, which a TIMESTAMP stores the same in
// every zone.
var instantFuncs = regexp.MustCompile(`\b(now|current_timestamp|localtime|localtimestamp|sysdate)\b(\s*\(\s*\d?\s*\))?`)

var seqFuncs = regexp.MustCompile(`\b(nextval|lastval|next\s+value\s+for|previous\s+value\s+for)\b`)

var onUpdate = regexp.MustCompile(`\bon update [a-z_]+(\s*\(\s*\d?\s*\))?`)

// checkServerComputed refuses what the server would compute differently
// for recast's writes (see above). q reads the ghost (the dry run's
// connection, for its temporary table).
func (m *migrator) checkServerComputed(ctx context.Context, q table.Querier, p *Plan) error {
	var name, create string
	if err := q.QueryRowContext(ctx, dbconn.Tag+"SHOW CREATE TABLE "+p.Ghost.QuotedName()).Scan(&name, &create); err != nil {
		return fmt.Errorf("read the new table's definition: %w", err)
	}
	paired := map[string]bool{}
	for _, pr := range p.Pairs {
		paired[strings.ToLower(pr.Ghost)] = true
	}
	return serverComputed(create, p.Ghost, paired, m.sem.UTC, m.sem.TimeZone)
}

// serverComputed is checkServerComputed on the ghost's SHOW CREATE TABLE.
func serverComputed(create string, ghost *table.Table, paired map[string]bool, utc bool, zone string) error {
	indexed := map[string]bool{}
	var timestamps []string
	for _, ix := range ghost.Indexes {
		for _, c := range ix.Columns {
			indexed[strings.ToLower(c)] = true
		}
	}
	for _, c := range ghost.Columns {
		if c.DataType == "timestamp" {
			timestamps = append(timestamps, strings.ToLower(table.QuoteIdent(c.Name)))
		}
	}
	zoned := func(expr string) bool {
		if zoneFuncs.MatchString(expr) {
			return true
		}
		for _, ts := range timestamps {
			if strings.Contains(expr, ts) {
				return true
			}
		}
		return false
	}
	const fix = "run this ALTER with the server's own ALTER TABLE"
	for _, line := range strings.Split(create, "\n") {
		col, low, isCol := splitLine(line)
		if !isCol {
			// A functional key part: KEY `fx` ((expr)).
			if !utc && strings.Contains(low, " key ") && strings.Contains(low, "( (") && zoned(low) {
				return fmt.Errorf("refused: the new table's key %s has an expression that depends on the time zone (%s), which recast's applier (in UTC) would compute differently from the server's ALTER; fix: %s",
					strings.TrimSuffix(strings.TrimSpace(line), ","), zone, fix)
			}
			continue
		}
		gi := ghost.ColumnIndex(col)
		if gi < 0 {
			continue
		}
		c := ghost.Columns[gi]
		qc := table.QuoteIdent(c.Name)
		if c.Generated {
			if utc || (c.Virtual && !indexed[strings.ToLower(c.Name)]) {
				continue // computed when read, in the reader's zone
			}
			if _, expr, ok := strings.Cut(low, " as ( "); ok && zoned(expr) {
				return fmt.Errorf("refused: generated column %s depends on the time zone (%s), and the rows recast's applier writes (in UTC) would get other values than the server's ALTER gives them; fix: %s",
					qc, zone, fix)
			}
			continue
		}
		if paired[strings.ToLower(c.Name)] {
			continue // its values are copied
		}
		if c.AutoIncrement {
			return fmt.Errorf("refused: the ALTER adds AUTO_INCREMENT column %s, which the server's ALTER numbers in one pass over the rows; recast's copy would number them in another order and give every row changed during the migration a new number; fix: %s",
				qc, fix)
		}
		_, def, ok := strings.Cut(onUpdate.ReplaceAllString(low, ""), " default ")
		if !ok {
			continue
		}
		if seqFuncs.MatchString(def) {
			return fmt.Errorf("refused: new column %s takes its default from a sequence, which the server's ALTER draws once per row and recast's writes would draw again for every row changed during the migration; fix: %s",
				qc, fix)
		}
		if utc {
			continue
		}
		if c.DataType == "timestamp" {
			def = instantFuncs.ReplaceAllString(def, "")
		}
		if zoned(def) {
			return fmt.Errorf("refused: new column %s has a default that depends on the time zone (%s), which recast's applier (in UTC) would compute differently for the rows it writes; fix: %s, make the column a TIMESTAMP, or add it with a constant default first",
				qc, zone, fix)
		}
	}
	return nil
}

// splitLine tokenizes one line of SHOW CREATE TABLE: a column's line
// starts with its quoted name (name, ok); rest is the line's text after it,
// its tokens separated by single spaces and its string literals blanked
// (”), lower case, so that a literal's text is not read as SQL.
func splitLine(line string) (name, rest string, ok bool) {
	toks, _ := sqltok.Scan(line, sqltok.Options{Exec: sqltok.Enter})
	if len(toks) == 0 {
		return "", "", false
	}
	from := 0
	if toks[0].Kind == sqltok.Quoted {
		name, ok, from = toks[0].Unquoted(), true, 1
	}
	parts := make([]string, 0, len(toks))
	for _, t := range toks[from:] {
		if t.Kind == sqltok.String {
			parts = append(parts, "''")
			continue
		}
		parts = append(parts, t.Text)
	}
	return name, " " + strings.ToLower(strings.Join(parts, " ")) + " ", ok
}
