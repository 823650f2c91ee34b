package ddl

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/recast-osc/recast/internal/sqltok"
)

// The ALTER body's tokens (package sqltok scans them): enough to split an
// ALTER body into its comma-separated specifications, to cut
// ALGORITHM=/LOCK= out of it verbatim and to rewrite the few MariaDB-only
// forms the TiDB parser rejects.

type tokKind = sqltok.Kind

const (
	tokWord   = sqltok.Word   // keyword, bare identifier or number
	tokQuoted = sqltok.Quoted // `identifier`
	tokString = sqltok.String // 'string' or "string"
	tokPunct  = sqltok.Punct  // any other single character
)

type token struct {
	kind       tokKind
	text       string // source text, quotes included
	start, end int    // byte offsets in the source
	depth      int    // parentheses open before this token
}

// is reports whether t is the bare word w (case-insensitive).
func (t token) is(w string) bool { return t.kind == tokWord && strings.EqualFold(t.text, w) }

// punct reports whether t is the punctuation character c.
func (t token) punct(c byte) bool { return t.kind == tokPunct && t.text[0] == c }

// ident returns the identifier t names: unquoted and unescaped.
func (t token) ident() string {
	if t.kind == tokQuoted || t.kind == tokString {
		q := t.text[:1]
		s := t.text[1 : len(t.text)-1]
		return strings.ReplaceAll(s, q+q, q)
	}
	return t.text
}

// upper is the token's text in upper case.
func (t token) upper() string { return strings.ToUpper(t.ident()) }

// tokenize splits s into tokens (sqltok, strictly). It fails on an
// unterminated string, identifier or comment, on unbalanced parentheses,
// and on executable comments (/*! ... */, /*M! ... */), whose content
// MariaDB runs but which recast could not analyse.
func tokenize(s string) ([]token, error) {
	toks, err := sqltok.Scan(s, sqltok.Options{Exec: sqltok.Refuse, Strict: true})
	var lexErr *sqltok.Error
	if errors.As(err, &lexErr) {
		return nil, syntaxErr(s, lexErr.Offset, lexErr.What, lexErr.Fix)
	}
	if err != nil {
		return nil, err
	}
	out := make([]token, len(toks))
	for i, t := range toks {
		out[i] = token{kind: t.Kind, text: t.Text, start: t.Start, end: t.End, depth: t.Depth}
	}
	return out, nil
}

// syntaxErr is an *Error pointing at byte offset off of s.
func syntaxErr(s string, off int, what, fix string) *Error {
	return &Error{Cause: "the ALTER could not be analysed: " + what + " " + position(s, off), Fix: fix}
}

// position describes byte offset off of s as `at line L, column C near "..."`.
func position(s string, off int) string {
	if off > len(s) {
		off = len(s)
	}
	line := 1 + strings.Count(s[:off], "\n")
	col := 1 + utf8.RuneCountInString(s[strings.LastIndexByte(s[:off], '\n')+1:off])
	near := s[off:]
	if nl := strings.IndexByte(near, '\n'); nl >= 0 {
		near = near[:nl]
	}
	if len(near) > 40 {
		cut := 40
		for cut > 0 && !utf8.RuneStart(near[cut]) {
			cut--
		}
		near = near[:cut] + "..."
	}
	if near == "" {
		return fmt.Sprintf("at line %d, column %d (end of the ALTER)", line, col)
	}
	return fmt.Sprintf("at line %d, column %d near %q", line, col, near)
}

// item is one comma-separated specification of the body: toks[lo:hi].
type item struct{ lo, hi int }

// splitItems splits toks[from:] at commas outside parentheses.
func splitItems(toks []token, from int) []item {
	var out []item
	lo := from
	for i := from; i < len(toks); i++ {
		if toks[i].depth == 0 && toks[i].punct(',') {
			out = append(out, item{lo, i})
			lo = i + 1
		}
	}
	if lo < len(toks) || len(out) > 0 {
		out = append(out, item{lo, len(toks)})
	}
	return out
}

// edit replaces src[start:end] with repl.
type edit struct {
	start, end int
	repl       string
}

// applyEdits applies sorted, non-overlapping edits to s.
func applyEdits(s string, edits []edit) string {
	var b strings.Builder
	at := 0
	for _, e := range edits {
		b.WriteString(s[at:e.start])
		b.WriteString(e.repl)
		at = e.end
	}
	b.WriteString(s[at:])
	return b.String()
}

// unmapOffset maps an offset in applyEdits(s, edits) back to an offset in s.
func unmapOffset(off int, edits []edit) int {
	delta := 0 // offset in s minus offset in the edited text
	for _, e := range edits {
		from := e.start - delta // where e begins in the edited text
		if off < from {
			break
		}
		if off < from+len(e.repl) { // inside a replacement: its start
			return e.start
		}
		delta += (e.end - e.start) - len(e.repl)
	}
	return off + delta
}

// removeItems returns the edits deleting the items marked in drop together
// with one comma each, keeping the text between the remaining ones verbatim.
func removeItems(toks []token, items []item, drop []bool) []edit {
	var out []edit
	kept := false
	for i, it := range items {
		if !drop[i] {
			kept = true
			continue
		}
		if it.lo == it.hi { // empty item: only its comma goes
			if it.hi < len(toks) {
				out = append(out, edit{toks[it.hi].start, toks[it.hi].end, ""})
			}
			continue
		}
		start, end := toks[it.lo].start, toks[it.hi-1].end
		switch {
		case kept: // take the comma before it, up to the next comma
			start = toks[it.lo-1].start
			if it.hi < len(toks) {
				end = toks[it.hi].start
			}
		case it.hi < len(toks): // first kept item follows: take the comma after, up to that item
			end = toks[it.hi].end
			if it.hi+1 < len(toks) {
				end = toks[it.hi+1].start
			}
		}
		out = append(out, edit{start, end, ""})
	}
	return out
}
