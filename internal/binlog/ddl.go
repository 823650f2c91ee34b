package binlog

import (
	"strings"

	"github.com/recast-osc/recast/internal/sqltok"
)

// queryClass is what a statement logged as a QueryEvent means for the
// watched table.
type queryClass uint8

const (
	queryOther queryClass = iota // BEGIN, COMMIT, statements on other tables
	queryDDL                     // may change the watched table's definition
	queryDML                     // statement-based DML that may change its rows
)

// token is one lexical element of a statement.
type token struct {
	text  string
	ident bool // unquoted word, `quoted` or "quoted" identifier
	word  bool // unquoted word (keywords are among these)
}

// tokenize splits stmt into identifiers and punctuation (package sqltok,
// leniently). Comments are dropped except MariaDB/MySQL executable comments
// (/*! ... */, /*M!nnnnnn ... */), whose content is kept as it runs on the
// server. String literals are reduced to "'": a table name is never a
// single-quoted string. A "double-quoted" text counts as an identifier (it
// is one under ANSI_QUOTES).
func tokenize(stmt string) []token {
	toks, _ := sqltok.Scan(stmt, sqltok.Options{Exec: sqltok.Enter}) // lenient: no error
	out := make([]token, 0, len(toks))
	for _, t := range toks {
		switch {
		case t.Kind == sqltok.Word:
			out = append(out, token{text: t.Text, ident: true, word: true})
		case t.Kind == sqltok.Quoted || (t.Kind == sqltok.String && t.Text[0] == '"'):
			out = append(out, token{text: t.Unquoted(), ident: true})
		case t.Kind == sqltok.String:
			out = append(out, token{text: "'"}) // a literal: keeps positions honest
		default:
			out = append(out, token{text: t.Text})
		}
	}
	return out
}

// keyword reports whether t is the unquoted keyword kw (upper case).
func (t token) keyword(kw string) bool { return t.word && strings.EqualFold(t.text, kw) }

// classifyQuery tells whether stmt, run with default schema defaultSchema,
// may change the definition (queryDDL) or, logged as a statement, the rows
// (queryDML) of schema.name. It errs on the side of queryDDL/queryDML: names
// are compared case-insensitively, and any mention of the table as an
// identifier in an ALTER/RENAME/DROP/TRUNCATE/CREATE TRIGGER/CREATE INDEX
// statement counts.
func classifyQuery(stmt, defaultSchema, schema, name string) queryClass {
	toks := tokenize(stmt)
	// MariaDB: SET STATEMENT var=value[, ...] FOR <statement>.
	if len(toks) > 1 && toks[0].keyword("SET") && toks[1].keyword("STATEMENT") {
		for i := 2; i < len(toks); i++ {
			if toks[i].keyword("FOR") {
				toks = toks[i+1:]
				break
			}
		}
	}
	if len(toks) == 0 || !toks[0].word {
		return queryOther
	}
	mentions := func() bool { return mentionsTable(toks, defaultSchema, schema, name) }
	switch strings.ToUpper(toks[0].text) {
	case "ALTER", "RENAME", "TRUNCATE":
		if mentions() {
			return queryDDL
		}
	case "DROP":
		i := 1
		if i < len(toks) && toks[i].keyword("TEMPORARY") {
			i++
		}
		if i < len(toks) && (toks[i].keyword("DATABASE") || toks[i].keyword("SCHEMA")) {
			i = skipIfExists(toks, i+1)
			if i >= len(toks) || strings.EqualFold(toks[i].text, schema) {
				return queryDDL
			}
			return queryOther
		}
		if i < len(toks) && toks[i].keyword("TRIGGER") {
			// The statement names the trigger, not its table: any trigger of
			// the watched table's schema may be one of its triggers.
			i = skipIfExists(toks, i+1)
			trgSchema := defaultSchema
			if i+2 < len(toks) && toks[i+1].text == "." && !toks[i+1].ident {
				trgSchema = toks[i].text
			}
			if trgSchema == "" || strings.EqualFold(trgSchema, schema) {
				return queryDDL
			}
			return queryOther
		}
		if mentions() {
			return queryDDL
		}
	case "CREATE":
		return classifyCreate(toks, defaultSchema, schema, name)
	case "INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD":
		if mentions() {
			return queryDML
		}
	}
	return queryOther
}

// classifyCreate handles CREATE statements: CREATE TABLE counts only when it
// creates the watched table (CREATE OR REPLACE, or a racing re-creation);
// CREATE TRIGGER and CREATE INDEX count when they mention it.
func classifyCreate(toks []token, defaultSchema, schema, name string) queryClass {
	for i := 1; i < len(toks); i++ {
		t := toks[i]
		if !t.word {
			continue
		}
		switch strings.ToUpper(t.text) {
		case "OR", "REPLACE", "TEMPORARY", "DEFINER", "UNIQUE", "FULLTEXT", "SPATIAL",
			"ONLINE", "OFFLINE", "IGNORE", "ALGORITHM", "SQL", "SECURITY", "AGGREGATE", "NONATOMIC":
			continue
		case "TABLE":
			j := skipIfNotExists(toks, i+1)
			if j >= len(toks) {
				return queryDDL
			}
			tblSchema, tbl := defaultSchema, toks[j].text
			if j+2 < len(toks) && toks[j+1].text == "." && !toks[j+1].ident {
				tblSchema, tbl = toks[j].text, toks[j+2].text
			}
			if strings.EqualFold(tbl, name) && (tblSchema == "" || strings.EqualFold(tblSchema, schema)) {
				return queryDDL
			}
			return queryOther
		case "TRIGGER", "INDEX":
			if mentionsTable(toks, defaultSchema, schema, name) {
				return queryDDL
			}
			return queryOther
		default:
			// Part of DEFINER = user@host, ALGORITHM = x, ... or another
			// object kind (VIEW, PROCEDURE, DATABASE, ...).
			if i > 0 && (toks[i-1].text == "=" || toks[i-1].text == "@") {
				continue
			}
			switch strings.ToUpper(t.text) {
			case "VIEW", "PROCEDURE", "FUNCTION", "EVENT", "DATABASE", "SCHEMA", "SEQUENCE",
				"USER", "ROLE", "SERVER", "PACKAGE", "TABLESPACE", "LOGFILE", "SYNONYM":
				return queryOther
			}
		}
	}
	return queryOther
}

func skipIfExists(toks []token, i int) int {
	if i+1 < len(toks) && toks[i].keyword("IF") && toks[i+1].keyword("EXISTS") {
		return i + 2
	}
	return i
}

func skipIfNotExists(toks []token, i int) int {
	if i+2 < len(toks) && toks[i].keyword("IF") && toks[i+1].keyword("NOT") && toks[i+2].keyword("EXISTS") {
		return i + 3
	}
	return i
}

// mentionsTable reports whether an identifier in toks may name schema.name:
// `name` unqualified (with the default schema ours or unknown) or qualified by
// our schema.
func mentionsTable(toks []token, defaultSchema, schema, name string) bool {
	for i, t := range toks {
		if !t.ident || !strings.EqualFold(t.text, name) {
			continue
		}
		if i >= 2 && toks[i-1].text == "." && !toks[i-1].ident && toks[i-2].ident {
			if strings.EqualFold(toks[i-2].text, schema) {
				return true
			}
			continue
		}
		if defaultSchema == "" || strings.EqualFold(defaultSchema, schema) {
			return true
		}
	}
	return false
}
