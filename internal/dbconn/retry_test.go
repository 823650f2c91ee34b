package dbconn

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// TestRetryable: lock waits, deadlocks and lost connections are tried
// again; other server errors are not, and neither is anything wrapped in
// NotRetryable, even when it wraps a retryable error on either side.
func TestRetryable(t *testing.T) {
	lost := fmt.Errorf("apply: %w", mysql.ErrInvalidConn)
	cases := []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: ErLockDeadlock}, true},
		{&mysql.MySQLError{Number: ErLockWaitTimeout}, true},
		{&mysql.MySQLError{Number: ErServerLost}, true},
		{driver.ErrBadConn, true},
		{lost, true},
		{&mysql.MySQLError{Number: ErDupEntry}, false},
		{errors.New("other"), false},
		{&NotRetryable{Err: lost}, false},
		{fmt.Errorf("chunk: %w", &NotRetryable{Err: fmt.Errorf("%w (and KILL failed: %w)", lost, driver.ErrBadConn)}), false},
	}
	for i, c := range cases {
		if got := Retryable(c.err); got != c.want {
			t.Errorf("case %d: Retryable(%v) = %v, want %v", i, c.err, got, c.want)
		}
	}
	if !errors.Is(&NotRetryable{Err: lost}, mysql.ErrInvalidConn) {
		t.Error("NotRetryable hides what it wraps from errors.Is")
	}
	n := 0
	err := Retry(context.Background(), 5, func(context.Context) error {
		n++
		return &NotRetryable{Err: lost}
	})
	if n != 1 || !errors.Is(err, mysql.ErrInvalidConn) {
		t.Errorf("Retry ran %d times and returned %v, want 1 run and the lost connection", n, err)
	}
}
