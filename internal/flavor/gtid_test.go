package flavor

import (
	"reflect"
	"testing"
)

func TestParseMariaList(t *testing.T) {
	got, err := parseMariaList("[0-1-5,0-2-3, 1-1-9]")
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint32][]mariaGTID{0: {{1, 5}, {2, 3}}, 1: {{1, 9}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseMariaList = %v, want %v", got, want)
	}
	if got, err := parseMariaList(""); err != nil || len(got) != 0 {
		t.Errorf("empty list: %v, %v", got, err)
	}
	for _, bad := range []string{"0-1", "a-1-2", "0-1-2-3"} {
		if _, err := parseMariaList(bad); err == nil {
			t.Errorf("parseMariaList(%q) accepted", bad)
		}
	}
}
