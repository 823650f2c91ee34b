package status

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
)

// TestTokenAuth: with --http-token every endpoint (the page, /metrics,
// /status, the POSTs) needs the bearer token; the page accepts it once as
// ?token= and keeps it in a cookie.
func TestTokenAuth(t *testing.T) {
	f := newFake()
	const token = "s3cret-token-x"
	s, err := ListenAuth("127.0.0.1:0", token, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := "http://" + s.Addr()
	do := func(method, path, bearer string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), method, base+path, http.NoBody)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(Header, "test")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, ep := range []struct{ method, path string }{{"GET", "/"}, {"GET", "/status"}, {"GET", "/history"}, {"GET", "/metrics"}, {"POST", "/pause"}, {"POST", "/abort"}} {
		for _, bad := range []string{"", "wrong", token + "x", token[:5]} {
			if code, body := do(ep.method, ep.path, bad); code != http.StatusUnauthorized || !strings.Contains(body, "token") {
				t.Errorf("%s %s with token %q: %d %s", ep.method, ep.path, bad, code, body)
			}
		}
	}
	if f.Calls() != "" {
		t.Fatalf("unauthenticated requests reached the controller: %s", f.Calls())
	}
	for _, ep := range []struct{ method, path, want string }{{"GET", "/", "chart-progress"}, {"GET", "/status", `"phase"`}, {"GET", "/metrics", "recast_"}, {"POST", "/pause", "paused"}} {
		if code, body := do(ep.method, ep.path, token); code != http.StatusOK || !strings.Contains(body, ep.want) {
			t.Errorf("%s %s with the token: %d %.200s", ep.method, ep.path, code, body)
		}
	}
	// The client sends it.
	c := NewClient(s.Addr())
	if _, err := c.Status(context.Background()); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("client without the token: %v", err)
	}
	c.Token = token
	if _, err := c.Post(context.Background(), "resume", nil); err != nil {
		t.Errorf("client with the token: %v", err)
	}
	// A browser: /?token= sets the cookie, then the page's requests pass.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(base + "/?token=" + token)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "chart-progress") || resp.Request.URL.RawQuery != "" {
		t.Errorf("page with ?token=: %d, url %s", resp.StatusCode, resp.Request.URL)
	}
	resp, err = browser.Get(base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/status with the cookie: %d", resp.StatusCode)
	}
	if got := f.Calls(); got != "pause; resume" {
		t.Errorf("calls %q", got)
	}
}

// TestListenBeyondLoopback: listening on all interfaces needs a token.
func TestListenBeyondLoopback(t *testing.T) {
	f := newFake()
	if _, err := ListenAuth("0.0.0.0:0", "", f, nil); err == nil || !strings.Contains(err.Error(), "--http-token") {
		t.Fatalf("no token on 0.0.0.0: %v", err)
	}
	s, err := ListenAuth("0.0.0.0:0", "tok", f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if Loopback(s.ln) {
		t.Error("0.0.0.0 counted as loopback")
	}
	s.Close()
	s, err = ListenAuth("127.0.0.1:0", "", f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !Loopback(s.ln) {
		t.Error("127.0.0.1 not counted as loopback")
	}
	s.Close()
}
