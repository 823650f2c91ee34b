package check

import (
	"strings"
)

// grant is one privilege line of SHOW GRANTS, reduced to what the
// privileges check needs.
type grant struct {
	privs  []string // upper case, column-level privileges left out; "ALL" for ALL [PRIVILEGES]
	global bool     // ON *.*
	db     string   // ON `db`.* (a LIKE pattern); "" otherwise
	role   bool     // "GRANT `role` TO user": a role grant, no privileges
}

// parseGrant parses one line of SHOW GRANTS. ok is false for lines that
// grant nothing recast counts (table, column, routine and proxy grants, SET
// DEFAULT ROLE, ...).
func parseGrant(line string) (g grant, ok bool) {
	line = strings.TrimSpace(line)
	if len(line) < 6 || !strings.EqualFold(line[:6], "GRANT ") {
		return grant{}, false
	}
	rest := line[6:]
	on := topLevelIndex(rest, " ON ")
	to := topLevelIndex(rest, " TO ")
	if on < 0 || (to >= 0 && to < on) {
		return grant{role: to >= 0}, to >= 0
	}
	privText, obj := rest[:on], rest[on+4:]
	if to := topLevelIndex(obj, " TO "); to >= 0 {
		obj = obj[:to]
	}
	obj = strings.TrimSpace(obj)
	switch {
	case obj == "*.*":
		g.global = true
	case strings.HasSuffix(obj, ".*") && !strings.Contains(obj, " "):
		g.db = unquoteIdent(strings.TrimSuffix(obj, ".*"))
	default:
		return grant{}, false // table, routine (FUNCTION x, PROCEDURE x), PROXY
	}
	for _, p := range splitTopLevel(privText) {
		p = strings.ToUpper(strings.Join(strings.Fields(p), " "))
		if strings.Contains(p, "(") {
			continue // column-level
		}
		if p == "ALL PRIVILEGES" {
			p = "ALL"
		}
		g.privs = append(g.privs, canonicalPriv(p))
	}
	return g, true
}

// canonicalPriv maps MariaDB's names to the names recast asks for.
func canonicalPriv(p string) string {
	if p == "BINLOG MONITOR" { // MariaDB 10.5+ shows REPLICATION CLIENT so
		return "REPLICATION CLIENT"
	}
	return p
}

// topLevelIndex finds sep in s outside quotes, backticks and parentheses.
func topLevelIndex(s, sep string) int {
	depth := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && quote != '`' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '`' || c == '\'' || c == '"':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
		case depth == 0 && strings.HasPrefix(s[i:], sep):
			return i
		}
	}
	return -1
}

// splitTopLevel splits a privilege list at commas outside parentheses.
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '`' || c == '\'':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// unquoteIdent removes backticks (doubled backticks inside stand for one).
func unquoteIdent(s string) string {
	if len(s) >= 2 && s[0] == '`' && s[len(s)-1] == '`' {
		return strings.ReplaceAll(s[1:len(s)-1], "``", "`")
	}
	return s
}

// likeMatch reports whether name matches a grant's database pattern: '%'
// any run, '_' any one character, '\' escapes the next one.
func likeMatch(pattern, name string) bool {
	if pattern == "" {
		return name == ""
	}
	switch c := pattern[0]; c {
	case '%':
		for i := 0; i <= len(name); i++ {
			if likeMatch(pattern[1:], name[i:]) {
				return true
			}
		}
		return false
	case '_':
		return name != "" && likeMatch(pattern[1:], name[1:])
	case '\\':
		if len(pattern) > 1 {
			return name != "" && name[0] == pattern[1] && likeMatch(pattern[2:], name[1:])
		}
	}
	return name != "" && name[0] == pattern[0] && likeMatch(pattern[1:], name[1:])
}

// privileges sums up the grants: what the user has on *.* and on db.
func privileges(gs []grant, db string) (global, schema map[string]bool) {
	global, schema = map[string]bool{}, map[string]bool{}
	for _, g := range gs {
		var into map[string]bool
		switch {
		case g.global:
			into = global
		case g.db != "" && likeMatch(g.db, db):
			into = schema
		default:
			continue
		}
		for _, p := range g.privs {
			into[p] = true
		}
	}
	return global, schema
}
