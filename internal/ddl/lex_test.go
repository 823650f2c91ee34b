package ddl

import (
	"strings"
	"testing"
)

func TestTokenize(t *testing.T) {
	src := "ADD `a``b` VARCHAR(5) DEFAULT 'x'',\\'(' # c, d\n, -- e\nCOMMENT \"y\" /* (, */ ;"
	toks, err := tokenize(src)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, tk := range toks {
		texts = append(texts, tk.text)
	}
	want := "ADD|`a``b`|VARCHAR|(|5|)|DEFAULT|'x'',\\'('|,|COMMENT|\"y\"|;"
	if got := strings.Join(texts, "|"); got != want {
		t.Errorf("tokens %s, want %s", got, want)
	}
	if toks[1].ident() != "a`b" || toks[4].depth != 1 || toks[5].depth != 0 {
		t.Errorf("ident %q depth %d %d", toks[1].ident(), toks[4].depth, toks[5].depth)
	}
	if items := splitItems(toks, 0); len(items) != 2 || items[0] != (item{0, 8}) {
		t.Errorf("items %v", items)
	}
}

func TestRemoveItems(t *testing.T) {
	cases := []struct {
		src  string
		drop []bool
		want string
	}{
		{"A, B, C", []bool{true, false, false}, "B, C"},
		{"A, B, C", []bool{false, true, false}, "A, C"},
		{"A, B, C", []bool{false, false, true}, "A, B"},
		{"A, B, C", []bool{true, true, false}, "C"},
		{"A, B, C", []bool{true, false, true}, "B"},
		{"A, B, C", []bool{true, true, true}, ""},
		{"A,\n  B /* b */,\n  C", []bool{false, true, false}, "A,\n  C"},
	}
	for _, tc := range cases {
		toks, err := tokenize(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		edits := removeItems(toks, splitItems(toks, 0), tc.drop)
		if got := strings.TrimSpace(applyEdits(tc.src, edits)); got != tc.want {
			t.Errorf("remove %v from %q = %q, want %q", tc.drop, tc.src, got, tc.want)
		}
	}
}

func TestUnmapOffset(t *testing.T) {
	src := "0123456789"
	edits := []edit{{2, 4, "abcd"}, {6, 8, ""}}
	out := applyEdits(src, edits) // "01abcd4589"
	if out != "01abcd4589" {
		t.Fatalf("applyEdits = %q", out)
	}
	for off, want := range map[int]int{0: 0, 1: 1, 2: 2, 4: 2, 5: 2, 6: 4, 7: 5, 8: 8, 9: 9, 10: 10} {
		if got := unmapOffset(off, edits); got != want {
			t.Errorf("unmapOffset(%d) = %d, want %d", off, got, want)
		}
	}
}

func TestPosition(t *testing.T) {
	s := "ab\ncdé fg"
	if got := position(s, strings.Index(s, "fg")); got != `at line 2, column 5 near "fg"` {
		t.Errorf("position = %s", got)
	}
	if got := position(s, len(s)); got != "at line 2, column 7 (end of the ALTER)" {
		t.Errorf("position at end = %s", got)
	}
}
