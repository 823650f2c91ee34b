package ddl

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions
)

// Analysis is what recast needs to know about an ALTER body.
type Analysis struct {
	// Statement is the body as given: trimmed, trailing ';' and comments
	// removed (for AnalyzeFor's full form: what follows the table name).
	Statement string
	// Renames maps lower(old column name) to the new name, from
	// CHANGE [COLUMN] old new ... and RENAME COLUMN old TO new.
	Renames map[string]string
	// Dropped, Added and Modified hold column names as written in the ALTER.
	// Modified names columns of the old table whose definition changes
	// (MODIFY, CHANGE — by its old name — and ALTER COLUMN).
	Dropped, Added, Modified []string
	// AddsUnique: the ALTER adds a UNIQUE or PRIMARY KEY, as an index or
	// inline in a column definition (ADD/MODIFY/CHANGE ... UNIQUE).
	AddsUnique   bool
	DropsPrimary bool
	AddsPrimary  bool
	// AddsForeignKey: the ALTER adds a FOREIGN KEY constraint.
	AddsForeignKey bool
	// Algorithm and Lock are the ALGORITHM= and LOCK= values given by the
	// user, upper case ("" when absent); Wait is a leading "WAIT n" or
	// "NOWAIT". All three are cut out of GhostStatement.
	Algorithm, Lock, Wait string
	// AutoIncrement: the ALTER sets the table option AUTO_INCREMENT=N
	// (AutoIncrementValue); the server's ALTER then ends with the counter
	// at N or past the highest value, whatever the old counter was.
	AutoIncrement      bool
	AutoIncrementValue uint64
	// GhostStatement is the body to run as ALTER TABLE <ghost> <body>: the
	// user's text verbatim without ALGORITHM=, LOCK= and WAIT/NOWAIT; "FORCE"
	// when nothing else is left.
	GhostStatement string
}

// Analyze analyses an ALTER body: what follows "ALTER TABLE t".
func Analyze(body string) (*Analysis, error) {
	src, toks, err := prepare(body)
	if err != nil {
		return nil, err
	}
	if fullFormLen(toks) > 0 {
		return nil, newErr("the ALTER is a whole statement (ALTER TABLE ...), but only what follows the table name is expected", fixBodyOnly)
	}
	return analyze(src, toks, 0)
}

// AnalyzeFor is Analyze that also accepts the whole statement,
// "ALTER [ONLINE] TABLE [IF EXISTS] name body", provided it alters table
// (ALTER IGNORE is refused). table is a bare name or schema.name; a schema is compared only when
// both table and the statement give one. Names compare exactly, as MariaDB on
// Linux does by default.
func AnalyzeFor(table, body string) (*Analysis, error) {
	src, toks, err := prepare(body)
	if err != nil {
		return nil, err
	}
	from := fullFormLen(toks)
	if from == 0 {
		return analyze(src, toks, 0)
	}
	for _, t := range toks[1 : from-1] {
		if t.is("IGNORE") {
			// MariaDB's ALTER IGNORE deletes the rows a new unique key
			// rejects and stores what does not fit as it can: recast
			// copies every row as it is or refuses.
			return nil, newErr("ALTER IGNORE TABLE: recast does not delete duplicate rows or store values that do not fit as IGNORE does",
				"remove the duplicates or the values first and drop IGNORE, or run the ALTER on the server")
		}
	}
	i := skipIfExists(toks, from, len(toks))
	if i >= len(toks) || (toks[i].kind != tokWord && toks[i].kind != tokQuoted) {
		return nil, syntaxErr(src, endOf(src, toks, i), "a table name must follow ALTER TABLE", fixBodyOnly)
	}
	schema, name := "", toks[i].ident()
	i++
	if i+1 < len(toks) && toks[i].punct('.') && toks[i+1].kind != tokPunct && toks[i+1].kind != tokString {
		schema, name = name, toks[i+1].ident()
		i += 2
	}
	wantSchema, wantName := "", table
	if dot := strings.IndexByte(table, '.'); dot >= 0 {
		wantSchema, wantName = table[:dot], table[dot+1:]
	}
	if name != wantName || (schema != "" && wantSchema != "" && schema != wantSchema) {
		got := quote(name)
		if schema != "" {
			got = quote(schema) + "." + got
		}
		return nil, newErr(fmt.Sprintf("ALTER of %s, but --table is %s", got, quote(table)),
			"alter the table given by --table, or pass only the ALTER body")
	}
	if i >= len(toks) {
		return nil, newErr("the ALTER has nothing after the table name", fixBodyOnly)
	}
	return analyze(src, toks, i)
}

func quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// endOf is the offset of toks[i], or the end of src.
func endOf(src string, toks []token, i int) int {
	if i < len(toks) {
		return toks[i].start
	}
	return len(src)
}

// prepare trims body, removes trailing semicolons and comments, tokenizes it
// and refuses several statements.
func prepare(body string) (string, []token, error) {
	src := strings.TrimSpace(body)
	for strings.HasSuffix(src, ";") {
		src = strings.TrimSpace(strings.TrimSuffix(src, ";"))
	}
	toks, err := tokenize(src)
	if err != nil {
		return "", nil, err
	}
	for i, t := range toks {
		if !t.punct(';') {
			continue
		}
		if i+1 < len(toks) {
			return "", nil, &Error{
				Cause: "the ALTER holds several statements: more text follows ';' " + position(src, toks[i+1].start),
				Fix:   "pass a single ALTER body; run other statements separately",
			}
		}
		src, toks = strings.TrimSpace(src[:t.start]), toks[:i] // only comments follow
	}
	if len(toks) == 0 {
		return "", nil, newErr("the ALTER is empty", fixBodyOnly)
	}
	// A trailing comment would swallow whatever a caller appends.
	return src[:toks[len(toks)-1].end], toks, nil
}

// fullFormLen is the number of tokens of a leading
// "ALTER [ONLINE] [IGNORE] TABLE", or 0.
func fullFormLen(toks []token) int {
	if len(toks) == 0 || !toks[0].is("ALTER") {
		return 0
	}
	i := 1
	for i < len(toks) && (toks[i].is("ONLINE") || toks[i].is("IGNORE")) {
		i++
	}
	if i < len(toks) && toks[i].is("TABLE") {
		return i + 1
	}
	return 0
}

var (
	algorithms = map[string]bool{"DEFAULT": true, "COPY": true, "INPLACE": true, "NOCOPY": true, "INSTANT": true}
	locks      = map[string]bool{"DEFAULT": true, "NONE": true, "SHARED": true, "EXCLUSIVE": true}
)

// parsePrefix is prepended to the body for the parser.
const parsePrefix = "ALTER TABLE `t` "

// analyze analyses toks[from:], the body, of src.
func analyze(src string, toks []token, from int) (*Analysis, error) {
	bodyStart := toks[from].start
	a := &Analysis{Statement: src[bodyStart:], Renames: map[string]string{}}
	i := from
	switch {
	case toks[i].is("NOWAIT"):
		a.Wait, i = "NOWAIT", i+1
	case toks[i].is("WAIT") && i+1 < len(toks) && toks[i+1].kind == tokWord:
		a.Wait, i = "WAIT "+toks[i+1].text, i+2
	}
	var common []edit
	if i > from {
		common = append(common, edit{bodyStart, endOf(src, toks, i), ""})
	}
	items := splitItems(toks, i)
	drop := make([]bool, len(items))
	for k, it := range items {
		if err := refuseItem(toks, it); err != nil {
			return nil, err
		}
		opt, val, ok := lockOrAlgorithm(toks, it)
		if !ok {
			continue
		}
		if opt == "ALGORITHM" {
			if !algorithms[val] {
				return nil, newErr(fmt.Sprintf("ALGORITHM=%s is not a MariaDB algorithm", val), "use DEFAULT, COPY, INPLACE, NOCOPY or INSTANT, or leave it out")
			}
			a.Algorithm = val
		} else {
			if !locks[val] {
				return nil, newErr(fmt.Sprintf("LOCK=%s is not a MariaDB lock option", val), "use DEFAULT, NONE, SHARED or EXCLUSIVE, or leave it out")
			}
			a.Lock = val
		}
		drop[k] = true
	}
	ghostEdits := append(append([]edit(nil), common...), removeItems(toks, items, drop)...)
	a.GhostStatement = strings.TrimSpace(applyEdits(src, ghostEdits)[bodyStart:])
	if a.GhostStatement == "" {
		a.GhostStatement = "FORCE"
	}

	// The copy for the parser: MariaDB-only forms rewritten (rewrite.go).
	pdrop := append([]bool(nil), drop...)
	var sanitized []edit
	for k, it := range items {
		if drop[k] {
			continue
		}
		e, empty := sanitize(toks, it)
		if empty {
			pdrop[k] = true
			continue
		}
		sanitized = append(sanitized, e...)
	}
	pedits := append(append(append([]edit(nil), common...), removeItems(toks, items, pdrop)...), sanitized...)
	pedits, err := mergeEdits(pedits)
	if err != nil {
		return nil, fmt.Errorf("ddl: internal error rewriting %q: %w", src, err)
	}
	text := applyEdits(src, pedits)[bodyStart:]
	if strings.TrimSpace(text) == "" {
		return a, nil
	}
	input := parsePrefix + text
	stmts, _, err := parser.New().Parse(input, "", "")
	if err != nil {
		return nil, parseError(src, bodyStart, input, pedits, err)
	}
	alter, ok := stmts[0].(*ast.AlterTableStmt)
	if len(stmts) != 1 || !ok {
		return nil, newErr("the ALTER body is not a list of ALTER TABLE specifications", fixBodyOnly)
	}
	for _, s := range alter.Specs {
		if err := a.spec(s); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// mergeEdits sorts edits and drops those inside another one (a rewritten
// token within a replaced DEFAULT expression).
func mergeEdits(edits []edit) ([]edit, error) {
	sort.SliceStable(edits, func(x, y int) bool {
		if edits[x].start != edits[y].start {
			return edits[x].start < edits[y].start
		}
		return edits[x].end > edits[y].end
	})
	var out []edit
	for _, e := range edits {
		if n := len(out); n > 0 && e.start < out[n-1].end {
			if e.end <= out[n-1].end {
				continue
			}
			return nil, fmt.Errorf("overlapping edits at %d", e.start)
		}
		out = append(out, e)
	}
	return out, nil
}

// lockOrAlgorithm recognises an item "ALGORITHM [=] x" or "LOCK [=] x".
func lockOrAlgorithm(toks []token, it item) (opt, val string, ok bool) {
	if it.lo == it.hi || !(toks[it.lo].is("ALGORITHM") || toks[it.lo].is("LOCK")) {
		return "", "", false
	}
	k := it.lo + 1
	if k < it.hi && toks[k].punct('=') {
		k++
	}
	if k != it.hi-1 || toks[k].kind == tokPunct {
		return "", "", false
	}
	return toks[it.lo].upper(), toks[k].upper(), true
}

// parseError turns a parser error into an *Error that points into src.
func parseError(src string, bodyStart int, input string, edits []edit, err error) error {
	const fix = "correct the ALTER there; if MariaDB accepts it as written, the analyser does not know this form: " + fixPlainAlter
	msg := err.Error()
	if off, ok := errOffset(input, msg); ok {
		o := off - len(parsePrefix)
		if o < 0 {
			o = 0
		}
		o = unmapOffset(o+bodyStart, edits)
		return &Error{Cause: "the ALTER could not be analysed: syntax error " + position(src, o), Fix: fix}
	}
	if j := strings.IndexByte(msg, ']'); strings.HasPrefix(msg, "[") && j > 0 {
		msg = msg[j+1:]
	}
	return &Error{Cause: "the ALTER could not be analysed: " + msg, Fix: fix}
}

// errOffset finds where in input the parser stopped: its message quotes the
// rest of the input from there (`line L column C near "rest"`, at most 2048
// bytes of it).
func errOffset(input, msg string) (int, bool) {
	i := strings.Index(msg, ` near "`)
	if i < 0 {
		return 0, false
	}
	rest := msg[i+len(` near "`):]
	for o := 0; o <= len(input); o++ {
		v := input[o:]
		if len(v) > 2048 {
			v = v[:2048]
		}
		if strings.HasPrefix(rest, v+`"`) {
			return o, true
		}
	}
	return 0, false
}

// spec records one parsed specification, or refuses it.
func (a *Analysis) spec(s *ast.AlterTableSpec) error {
	switch s.Tp {
	case ast.AlterTableOption:
		for _, o := range s.Options {
			if o.Tp == ast.TableOptionAutoIncrement {
				a.AutoIncrement, a.AutoIncrementValue = true, o.UintValue
			}
			if o.Tp == ast.TableOptionEngine && o.StrValue != "" && !strings.EqualFold(o.StrValue, "InnoDB") {
				return newErr(fmt.Sprintf("ENGINE=%s: recast builds the new table with InnoDB only", o.StrValue),
					"leave ENGINE= out, or change the engine with a plain ALTER TABLE")
			}
		}
	case ast.AlterTableAddColumns:
		for _, c := range s.NewColumns {
			a.Added = append(a.Added, c.Name.Name.O)
			a.inlineKeys(c)
		}
		for _, c := range s.NewConstraints {
			a.constraint(c)
		}
	case ast.AlterTableAddConstraint:
		a.constraint(s.Constraint)
	case ast.AlterTableDropColumn:
		a.Dropped = append(a.Dropped, s.OldColumnName.Name.O)
	case ast.AlterTableDropPrimaryKey:
		a.DropsPrimary = true
	case ast.AlterTableDropIndex:
		if strings.EqualFold(s.Name, "PRIMARY") {
			a.DropsPrimary = true
		}
	case ast.AlterTableModifyColumn:
		a.Modified = append(a.Modified, s.NewColumns[0].Name.Name.O)
		a.inlineKeys(s.NewColumns[0])
	case ast.AlterTableChangeColumn:
		old := s.OldColumnName.Name.O
		a.Modified = append(a.Modified, old)
		a.rename(old, s.NewColumns[0].Name.Name.O)
		a.inlineKeys(s.NewColumns[0])
	case ast.AlterTableRenameColumn:
		a.rename(s.OldColumnName.Name.O, s.NewColumnName.Name.O)
	case ast.AlterTableAlterColumn:
		a.Modified = append(a.Modified, s.NewColumns[0].Name.Name.O)
	case ast.AlterTableAlgorithm:
		a.Algorithm = strings.ToUpper(s.Algorithm.String())
	case ast.AlterTableLock:
		a.Lock = strings.ToUpper(s.LockType.String())
	case ast.AlterTableDropForeignKey, ast.AlterTableRenameIndex, ast.AlterTableForce,
		ast.AlterTableEnableKeys, ast.AlterTableDisableKeys, ast.AlterTableAlterCheck,
		ast.AlterTableDropCheck, ast.AlterTableIndexInvisible:
	case ast.AlterTableRenameTable:
		return newErr("RENAME TO renames the table, which recast cannot combine with its copy-and-swap",
			"leave the rename out and rename the table with RENAME TABLE before or after recast")
	case ast.AlterTableOrderByColumns:
		return newErr("ORDER BY orders rows only while the table is copied; InnoDB keeps rows in primary key order anyway",
			"leave ORDER BY out")
	case ast.AlterTableImportTablespace, ast.AlterTableDiscardTablespace,
		ast.AlterTableImportPartitionTablespace, ast.AlterTableDiscardPartitionTablespace:
		return newErr("DISCARD/IMPORT TABLESPACE works on the table's data file, not on its definition", fixPlainAlter)
	case ast.AlterTablePartition:
		return errRepartition
	case ast.AlterTableAddPartitions, ast.AlterTableCoalescePartitions, ast.AlterTableDropPartition,
		ast.AlterTableTruncatePartition, ast.AlterTableRemovePartitioning, ast.AlterTableRebuildPartition,
		ast.AlterTableReorganizePartition, ast.AlterTableCheckPartitions, ast.AlterTableExchangePartition,
		ast.AlterTableOptimizePartition, ast.AlterTableRepairPartition, ast.AlterTableWithValidation,
		ast.AlterTableWithoutValidation:
		return errPartitions
	default:
		var b strings.Builder
		text := "this specification"
		if s.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)) == nil && b.Len() > 0 {
			text = b.String()
		}
		return newErr(fmt.Sprintf("%q is not a MariaDB ALTER TABLE specification recast supports", text),
			"leave it out, or "+fixPlainAlter)
	}
	return nil
}

var (
	errRepartition = newErr("PARTITION BY repartitions the table, which recast does not support yet",
		"repartition with a plain ALTER TABLE ... PARTITION BY")
	errPartitions = newErr("partition management (ADD/DROP/COALESCE/REORGANIZE/TRUNCATE/EXCHANGE/REBUILD/CONVERT ... PARTITION, REMOVE PARTITIONING) is not a schema change recast performs",
		fixPlainAlter)
	errVersioning = newErr("system versioning (ADD/DROP SYSTEM VERSIONING, AS ROW START/END) changes how the table keeps history, which a row copy cannot carry over",
		fixPlainAlter)
	errPeriod = newErr("ADD/DROP PERIOD FOR is not supported by recast", fixPlainAlter)
)

// refuseItem refuses, before parsing, the specifications the parser does
// not know but recast refuses anyway, so that the user gets the reason
// rather than a syntax error.
func refuseItem(toks []token, it item) error {
	w := func(k int) string {
		if it.lo+k < it.hi && toks[it.lo+k].kind == tokWord {
			return toks[it.lo+k].upper()
		}
		return ""
	}
	switch w0, w1 := w(0), w(1); {
	case (w0 == "ADD" || w0 == "DROP") && w1 == "SYSTEM" && w(2) == "VERSIONING",
		(w0 == "WITH" || w0 == "WITHOUT") && w1 == "SYSTEM":
		return errVersioning
	case (w0 == "ADD" || w0 == "DROP") && w1 == "PERIOD" && w(2) == "FOR":
		return errPeriod
	case w0 == "PARTITION" && w1 == "BY":
		return errRepartition
	case w0 == "REMOVE" && w1 == "PARTITIONING", w0 == "CONVERT" && (w1 == "PARTITION" || w1 == "TABLE"):
		return errPartitions
	case w1 == "PARTITION" && partitionVerbs[w0]:
		return errPartitions
	}
	for k := it.lo; k+2 < it.hi; k++ {
		if toks[k].depth == 0 && toks[k].is("AS") && toks[k+1].is("ROW") && (toks[k+2].is("START") || toks[k+2].is("END")) {
			return errVersioning
		}
	}
	return nil
}

var partitionVerbs = map[string]bool{
	"ADD": true, "DROP": true, "COALESCE": true, "REORGANIZE": true, "TRUNCATE": true,
	"EXCHANGE": true, "REBUILD": true, "ANALYZE": true, "CHECK": true, "OPTIMIZE": true,
	"REPAIR": true, "DISCARD": true, "IMPORT": true,
}

func (a *Analysis) rename(from, to string) {
	if from != to {
		a.Renames[strings.ToLower(from)] = to
	}
}

// inlineKeys notes PRIMARY KEY / UNIQUE written in a column definition.
func (a *Analysis) inlineKeys(c *ast.ColumnDef) {
	for _, o := range c.Options {
		switch o.Tp {
		case ast.ColumnOptionPrimaryKey:
			a.AddsPrimary, a.AddsUnique = true, true
		case ast.ColumnOptionUniqKey:
			a.AddsUnique = true
		}
	}
}

func (a *Analysis) constraint(c *ast.Constraint) {
	if c == nil {
		return
	}
	switch c.Tp {
	case ast.ConstraintPrimaryKey:
		a.AddsPrimary, a.AddsUnique = true, true
	case ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex:
		a.AddsUnique = true
	case ast.ConstraintForeignKey:
		a.AddsForeignKey = true
	}
}
