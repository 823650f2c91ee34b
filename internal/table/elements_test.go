package table

import (
	"slices"
	"testing"
)

// TestParseElements: members as the server prints them in COLUMN_TYPE, its
// escapes undone (a member holding a newline read as another member).
func TestParseElements(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"enum('a','b')", []string{"a", "b"}},
		{"enum('it''s','a,b','(x)')", []string{"it's", "a,b", "(x)"}},
		{`enum('a\nb','anb','c\rd','\0','\Z','back\\slash')`, []string{"a\nb", "anb", "c\rd", "\x00", "\x1a", `back\slash`}},
		{"set('','x')", []string{"", "x"}},
		{"int(11)", nil},
	} {
		if got := parseElements(c.in); !slices.Equal(got, c.want) {
			t.Errorf("parseElements(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
