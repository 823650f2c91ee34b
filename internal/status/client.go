package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client talks to a migration's HTTP endpoint (recast ctl).
type Client struct {
	Base string // http://127.0.0.1:PORT
	HTTP *http.Client
	// Token, when set, is sent as "Authorization: Bearer <Token>".
	Token string
}

func (c *Client) auth(req *http.Request) {
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
}

// NewClient returns a client for addr: host:port or a URL.
func NewClient(addr string) *Client {
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &Client{Base: strings.TrimRight(base, "/"), HTTP: &http.Client{Timeout: 10 * time.Second}}
}

// Status returns GET /status.
func (c *Client) Status(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/status", http.NoBody)
	if err != nil {
		return s, err
	}
	c.auth(req)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return s, fmt.Errorf("no migration answers at %s: %w", c.Base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return s, fmt.Errorf("%s: %s: %s", c.Base, resp.Status, strings.TrimSpace(string(b)))
	}
	// Decode first: the order in which "return s, f(&s)" evaluates s and
	// the call is unspecified.
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return s, fmt.Errorf("%s: read the status: %w", c.Base, err)
	}
	return s, nil
}

// Post calls a POST endpoint (pause, resume, cutover, abort, set) with form
// values and returns the server's message.
func (c *Client) Post(ctx context.Context, path string, values url.Values) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+"/"+strings.TrimPrefix(path, "/"), strings.NewReader(values.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set(Header, "ctl")
	c.auth(req)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return "", fmt.Errorf("no migration answers at %s: %w", c.Base, err)
	}
	defer resp.Body.Close()
	var r reply
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err := json.Unmarshal(body, &r); err != nil {
		return "", fmt.Errorf("%s: %s: %s", c.Base, resp.Status, strings.TrimSpace(string(body)))
	}
	if !r.OK {
		return "", fmt.Errorf("%s", r.Error)
	}
	return r.Message, nil
}
