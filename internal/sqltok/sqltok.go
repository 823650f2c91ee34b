// Package sqltok is recast's one SQL tokenizer (MariaDB/MySQL lexical
// rules): words, `quoted identifiers`, 'strings' and "double-quoted text",
// punctuation, with comments dropped. It knows strings, quoted identifiers,
// comments, executable comments and parentheses; nothing more. Package ddl
// uses it to analyse the user's ALTER body (strictly: an unterminated quote
// or comment, unbalanced parentheses or an executable comment is an error);
// package binlog uses it to classify the statements the server logged
// (leniently, entering executable comments, whose content the server ran).
// It imports nothing but the standard library.
package sqltok

import (
	"fmt"
	"strings"
)

// Kind is a token's kind.
type Kind int

const (
	Word   Kind = iota // keyword, bare identifier or number
	Quoted             // `identifier`
	String             // 'string' or "string" (an identifier under ANSI_QUOTES)
	Punct              // any other single character
)

// Token is one lexical element.
type Token struct {
	Kind       Kind
	Text       string // source text, quotes included
	Start, End int    // byte offsets in the source
	Depth      int    // parentheses open before this token
}

// Is reports whether t is the bare word w (case-insensitive).
func (t Token) Is(w string) bool { return t.Kind == Word && strings.EqualFold(t.Text, w) }

// IsPunct reports whether t is the punctuation character c.
func (t Token) IsPunct(c byte) bool { return t.Kind == Punct && t.Text[0] == c }

// Unquoted is the text t stands for: quotes removed, doubled quotes
// undone, and in 'strings' and "double-quoted text" backslash escapes
// undone (\x stands for x; recast needs names, not escape semantics).
func (t Token) Unquoted() string {
	if t.Kind != Quoted && t.Kind != String {
		return t.Text
	}
	q := t.Text[0]
	s := t.Text[1:]
	if len(s) > 0 && s[len(s)-1] == q { // (a lenient scan's unterminated text has none)
		s = s[:len(s)-1]
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == q && i+1 < len(s) && s[i+1] == q:
			i++
		case s[i] == '\\' && q != '`' && i+1 < len(s):
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Exec says what Scan does with executable comments (/*! ... */,
// /*M!nnnnn ... */).
type Exec int

const (
	// Refuse: an executable comment is an error (its content would run but
	// could not be analysed).
	Refuse Exec = iota
	// Enter: the comment's content is scanned as statement text.
	Enter
)

// Options control Scan.
type Options struct {
	Exec Exec
	// Strict: unterminated quotes and comments and unbalanced parentheses
	// are errors; otherwise a quote or comment runs to the end and the
	// parentheses are not checked.
	Strict bool
}

// Error is a lexical error at byte offset Offset.
type Error struct {
	Offset int
	What   string // e.g. "unterminated ' quote"
	Fix    string // what the user can do
}

func (e *Error) Error() string { return fmt.Sprintf("%s at offset %d", e.What, e.Offset) }

// IsWordByte reports whether c may be part of a bare word.
func IsWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 ||
		('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// scanner is Scan's state.
type scanner struct {
	s      string
	opts   Options
	toks   []Token
	depth  int
	inExec int // executable comments open (Enter)
}

// Scan splits s into tokens. On an error (only with Refuse or Strict) it
// returns the tokens before it as well.
func Scan(s string, opts Options) ([]Token, error) {
	sc := &scanner{s: s, opts: opts}
	for i := 0; i < len(s); {
		next, err := sc.step(i)
		if err != nil {
			return sc.toks, err
		}
		i = next
	}
	if opts.Strict && sc.depth != 0 {
		return sc.toks, &Error{Offset: len(s), What: "unbalanced '('", Fix: "check the parentheses"}
	}
	return sc.toks, nil
}

// step scans what starts at i and returns where the next begins.
func (sc *scanner) step(i int) (int, error) {
	s := sc.s
	c := s[i]
	switch {
	case isSpace(c):
		return i + 1, nil
	case c == '#' || (c == '-' && strings.HasPrefix(s[i:], "--") && (i+2 == len(s) || s[i+2] <= ' ')):
		if e := strings.IndexByte(s[i:], '\n'); e >= 0 {
			return i + e + 1, nil
		}
		return len(s), nil
	case c == '/' && strings.HasPrefix(s[i:], "/*"):
		return sc.comment(i)
	case c == '*' && sc.inExec > 0 && strings.HasPrefix(s[i:], "*/"):
		sc.inExec--
		return i + 2, nil
	case c == '\'' || c == '"' || c == '`':
		return sc.quoted(i)
	case IsWordByte(c):
		j := i
		for j < len(s) && IsWordByte(s[j]) {
			j++
		}
		sc.toks = append(sc.toks, Token{Kind: Word, Text: s[i:j], Start: i, End: j, Depth: sc.depth})
		return j, nil
	}
	if c == ')' {
		sc.depth--
		if sc.depth < 0 {
			if sc.opts.Strict {
				return 0, &Error{Offset: i, What: "unbalanced ')'", Fix: "check the parentheses"}
			}
			sc.depth = 0
		}
	}
	sc.toks = append(sc.toks, Token{Kind: Punct, Text: s[i : i+1], Start: i, End: i + 1, Depth: sc.depth})
	if c == '(' {
		sc.depth++
	}
	return i + 1, nil
}

// comment skips a /* comment */ or enters an executable one.
func (sc *scanner) comment(i int) (int, error) {
	s := sc.s
	j := i + 2
	exec := false
	if j < len(s) && s[j] == '!' {
		exec, j = true, j+1
	} else if j+1 < len(s) && (s[j] == 'M' || s[j] == 'm') && s[j+1] == '!' {
		exec, j = true, j+2
	}
	if exec {
		if sc.opts.Exec == Refuse {
			return 0, &Error{Offset: i, What: "executable comments (/*! ... */, /*M! ... */) are not supported",
				Fix: "write the clause inside the comment plainly, or leave it out"}
		}
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++ // version number
		}
		sc.inExec++
		return j, nil
	}
	e := strings.Index(s[j:], "*/")
	if e < 0 {
		if sc.opts.Strict {
			return 0, &Error{Offset: i, What: "unterminated /* comment", Fix: "close the comment with */"}
		}
		return len(s), nil
	}
	return j + e + 2, nil
}

// quoted scans a quoted string or identifier.
func (sc *scanner) quoted(i int) (int, error) {
	s := sc.s
	c := s[i]
	j := i + 1
	for ; j < len(s); j++ {
		if s[j] == '\\' && c != '`' {
			j++
			continue
		}
		if s[j] == c {
			if j+1 < len(s) && s[j+1] == c {
				j++
				continue
			}
			break
		}
	}
	if j >= len(s) {
		if sc.opts.Strict {
			return 0, &Error{Offset: i, What: fmt.Sprintf("unterminated %c quote", c), Fix: "close the quoted text"}
		}
		j = len(s) - 1
	}
	k := String
	if c == '`' {
		k = Quoted
	}
	end := min(j+1, len(s))
	sc.toks = append(sc.toks, Token{Kind: k, Text: s[i:end], Start: i, End: end, Depth: sc.depth})
	return end, nil
}
