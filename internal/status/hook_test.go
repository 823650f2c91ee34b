package status

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// hookedFake is a fake whose on-interactive-command hook refuses "pause".
type hookedFake struct {
	*fake
	seen []string
}

func (h *hookedFake) InteractiveCommand(_ context.Context, command string) error {
	h.seen = append(h.seen, command)
	if strings.HasPrefix(command, "pause") {
		return errors.New("hook gh-ost-on-interactive-command failed: exit status 1")
	}
	return nil
}

// TestInteractiveCommandHooks: the socket and the HTTP endpoint run the
// on-interactive-command hooks before a command, and a failing hook
// refuses it (the command is not carried out).
func TestInteractiveCommandHooks(t *testing.T) {
	h := &hookedFake{fake: newFake()}
	if out := Command(h, "pause"); !strings.HasPrefix(out, "ERROR: hook") {
		t.Errorf("socket pause with a failing hook: %q", out)
	}
	if out := Command(h, "resume"); strings.HasPrefix(out, "ERROR") {
		t.Errorf("socket resume: %q", out)
	}
	if out := Command(h, "help"); strings.HasPrefix(out, "ERROR") {
		t.Errorf("help: %q", out)
	}

	srv := httptest.NewServer(handler(h, nil))
	defer srv.Close()
	post := func(path string, form url.Values) int {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set(Header, "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/pause", nil); code != http.StatusBadRequest {
		t.Errorf("POST /pause with a failing hook: %d, want 400", code)
	}
	if code := post("/set", url.Values{"threads": {"3"}}); code != http.StatusOK {
		t.Errorf("POST /set: %d, want 200", code)
	}
	if calls := h.Calls(); strings.Contains(calls, "pause") || !strings.Contains(calls, "resume") || !strings.Contains(calls, "set threads=3") {
		t.Errorf("carried out: %q (pause must be refused by the hook)", calls)
	}
	want := []string{"pause", "resume", "pause", "set threads=3"}
	if strings.Join(h.seen, "|") != strings.Join(want, "|") {
		t.Errorf("hooks saw %q, want %q", h.seen, want)
	}
}
