package sqltok

import (
	"errors"
	"strings"
	"testing"
)

// render is the tokens as "kind:text" separated by spaces.
func render(toks []Token) string {
	names := map[Kind]string{Word: "w", Quoted: "q", String: "s", Punct: "p"}
	var parts []string
	for _, t := range toks {
		parts = append(parts, names[t.Kind]+":"+t.Text)
	}
	return strings.Join(parts, " ")
}

func TestScan(t *testing.T) {
	for _, c := range []struct {
		in   string
		opts Options
		want string
	}{
		{"ADD COLUMN `a``b` INT", Options{}, "w:ADD w:COLUMN q:`a``b` w:INT"},
		{"x = 'it''s' , \"d\\\"q\"", Options{}, `w:x p:= s:'it''s' p:, s:"d\"q"`},
		{"a -- comment\nb # another\nc --x", Options{}, "w:a w:b w:c p:- p:- w:x"},
		{"a /* note */ b", Options{}, "w:a w:b"},
		{"ALTER TABLE t /*!50100 ADD c INT */", Options{Exec: Enter}, "w:ALTER w:TABLE w:t w:ADD w:c w:INT"},
		{"DROP /*M!100400 TABLE */ t", Options{Exec: Enter}, "w:DROP w:TABLE w:t"},
		{"f(a, (b))", Options{Strict: true}, "w:f p:( w:a p:, p:( w:b p:) p:)"},
		{"über_1 $x", Options{}, "w:über_1 w:$x"},
		{"'unterminated", Options{}, "s:'unterminated"},
	} {
		toks, err := Scan(c.in, c.opts)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got := render(toks); got != c.want {
			t.Errorf("%q:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}

func TestScanDepthAndOffsets(t *testing.T) {
	s := "a(b,(c)),d"
	toks, err := Scan(s, Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	depths := make([]int, len(toks))
	for i, tk := range toks {
		depths[i] = tk.Depth
		if s[tk.Start:tk.End] != tk.Text {
			t.Errorf("token %q at %d..%d is %q in the source", tk.Text, tk.Start, tk.End, s[tk.Start:tk.End])
		}
	}
	// a ( b , ( c ) ) , d
	want := []int{0, 0, 1, 1, 1, 2, 1, 0, 0, 0}
	for i := range want {
		if depths[i] != want[i] {
			t.Fatalf("depths %v, want %v", depths, want)
		}
	}
}

func TestScanErrors(t *testing.T) {
	for _, c := range []struct {
		in     string
		opts   Options
		offset int
		what   string
	}{
		{"ADD c INT /*! x */", Options{Strict: true}, 10, "executable comments"},
		{"ADD c INT /*M!100000 x */", Options{}, 10, "executable comments"},
		{"a 'b", Options{Strict: true}, 2, "unterminated ' quote"},
		{"a `b", Options{Strict: true}, 2, "unterminated ` quote"},
		{"a /* b", Options{Strict: true}, 2, "unterminated /* comment"},
		{"a) b", Options{Strict: true}, 1, "unbalanced ')'"},
		{"(a", Options{Strict: true}, 2, "unbalanced '('"},
	} {
		toks, err := Scan(c.in, c.opts)
		var e *Error
		if !errors.As(err, &e) || e.Offset != c.offset || !strings.Contains(e.What, c.what) || e.Fix == "" {
			t.Errorf("%q: %v (%+v), want %q at %d", c.in, err, e, c.what, c.offset)
		}
		if len(toks) == 0 && c.offset > 0 {
			t.Errorf("%q: the tokens before the error are not returned", c.in)
		}
	}
	// Lenient: the same texts scan without an error.
	for _, in := range []string{"a 'b", "a /* b", "a) b", "(a"} {
		if _, err := Scan(in, Options{Exec: Enter}); err != nil {
			t.Errorf("lenient %q: %v", in, err)
		}
	}
}

func TestUnquoted(t *testing.T) {
	toks, _ := Scan("`a``b` \"c\\\"d\" 'e''f' 'g\\\\h' w `x\\y`", Options{})
	var got []string
	for _, tk := range toks {
		got = append(got, tk.Unquoted())
	}
	want := []string{"a`b", `c"d`, "e'f", `g\h`, "w", `x\y`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("unquoted %q, want %q", got, want)
	}
	if !toks[4].Is("W") || toks[0].Is("a`b") || !(Token{Kind: Punct, Text: ","}).IsPunct(',') {
		t.Error("Is/IsPunct")
	}
}
