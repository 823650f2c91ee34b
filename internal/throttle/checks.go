package throttle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Check is an extra source of throttling polled every Every (default 1 s):
// Run returns why the copy must pause, or "" when it need not.
type Check struct {
	Name  string
	Every time.Duration
	Run   func(ctx context.Context) string
}

// QueryCheck is gh-ost's --throttle-query: query returns one number; the
// copy pauses while it is above 0. An error, no row or a non-number
// throttles too (fail closed), with the reason.
func QueryCheck(db *sql.DB, query string) Check {
	var q atomic.Pointer[string]
	q.Store(&query)
	return LiveQueryCheck(db, &q)
}

// LiveQueryCheck is QueryCheck of the query q holds at each poll (changed
// while the migration runs: the socket's throttle-query=, recast ctl set);
// an empty query never throttles.
func LiveQueryCheck(db *sql.DB, q *atomic.Pointer[string]) Check {
	return Check{Name: "throttle-query", Every: time.Second, Run: func(ctx context.Context) string {
		query := *q.Load()
		if query == "" {
			return ""
		}
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		var v sql.NullString
		err := db.QueryRowContext(qctx, query).Scan(&v)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return "throttle-query returned no row"
		case err != nil:
			return "throttle-query failed: " + oneLine(err)
		case !v.Valid:
			return "throttle-query returned NULL"
		}
		n, err := strconv.ParseFloat(v.String, 64)
		if err != nil {
			return fmt.Sprintf("throttle-query returned %q, not a number", v.String)
		}
		if n > 0 {
			return "throttle-query returned " + v.String
		}
		return ""
	}}
}

// HTTPCheck is gh-ost's --throttle-http: the copy pauses while a GET of
// url does not answer 200 OK within timeout.
func HTTPCheck(url string, timeout time.Duration) Check {
	client := &http.Client{Timeout: timeout}
	return Check{Name: "throttle-http", Every: time.Second, Run: func(ctx context.Context) string {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
		if err != nil {
			return "throttle-http: " + oneLine(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
				return fmt.Sprintf("throttle-http: %s did not answer within %s", url, timeout)
			}
			return "throttle-http: " + oneLine(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("throttle-http: %s answered %d", url, resp.StatusCode)
		}
		return ""
	}}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
