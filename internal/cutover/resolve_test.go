package cutover

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// fakeServer answers resolveSwap's questions from a table set, with faults.
type fakeServer struct {
	tabs      map[string]string // name -> comment
	killErr   error
	alive     int // sessionGone answers false this many times
	renameErr error
	renamed   []string
	killed    []int64
}

func (f *fakeServer) killQuery(context.Context, int64) error { return nil }
func (f *fakeServer) sessionStateQuery() string              { return "" }
func (f *fakeServer) killSession(_ context.Context, id int64) error {
	f.killed = append(f.killed, id)
	return f.killErr
}
func (f *fakeServer) sessionGone(context.Context, int64) (bool, error) {
	if f.alive > 0 {
		f.alive--
		return false, nil
	}
	return true, nil
}
func (f *fakeServer) tables(_ context.Context, _ string, names ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		if c, ok := f.tabs[n]; ok {
			out[n] = c
		}
	}
	return out, nil
}
func (f *fakeServer) rename(_ context.Context, from, to string) error {
	if f.renameErr != nil {
		return f.renameErr
	}
	f.renamed = append(f.renamed, from+" -> "+to)
	return nil
}

func testConfig() Config {
	return Config{Schema: "s", Table: "t", Ghost: "_t_new", Old: "_t_old",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// errLost is what the driver reports when the swap session's connection
// breaks while its RENAME runs: the client cannot know the outcome.
var errLost = mysql.ErrInvalidConn

// TestResolveSwapFailurePaths: after the swap session's RENAME reported an
// error, the outcome comes from the server, never from the error alone.
func TestResolveSwapFailurePaths(t *testing.T) {
	ctx := context.Background()
	renameErr := &mysql.MySQLError{Number: 1050, Message: "Table 't_rcsentry' already exists"}
	for _, c := range []struct {
		name        string
		srv         *fakeServer
		rerr        error
		swapped     bool
		unknown     bool
		renamedBack bool
	}{
		{
			name: "lost connection, RENAME committed",
			srv:  &fakeServer{tabs: map[string]string{"t": "", "t_rcsentry": "the user's comment"}, alive: 3},
			rerr: errLost, swapped: true,
		},
		{
			name: "lost connection, RENAME not done",
			srv:  &fakeServer{tabs: map[string]string{"t": "", "t_rcnew": ""}},
			rerr: errLost, renamedBack: true,
		},
		{
			name: "RENAME error after the sentry drop, table unchanged",
			srv:  &fakeServer{tabs: map[string]string{"t": "", "t_rcnew": ""}},
			rerr: renameErr, renamedBack: true,
		},
		{
			name: "RENAME error, but a sentry is back (recreated by someone): unknown",
			srv:  &fakeServer{tabs: map[string]string{"t": "", "t_rcnew": "", "t_rcsentry": SentryComment}},
			rerr: renameErr, unknown: true,
		},
		{
			name: "lost connection, the table is gone: unknown",
			srv:  &fakeServer{tabs: map[string]string{"t_rcsentry": ""}},
			rerr: errLost, unknown: true,
		},
		{
			name: "lost connection, the sentry name holds a sentry: unknown",
			srv:  &fakeServer{tabs: map[string]string{"t": "", "t_rcsentry": SentryComment}},
			rerr: errLost, unknown: true,
		},
		{
			name: "the swap session cannot be killed: unknown",
			srv:  &fakeServer{tabs: map[string]string{"t": "", "t_rcnew": ""}, killErr: errors.New("connection refused")},
			rerr: errLost, unknown: true,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			swapped, err := resolveSwap(ctx, c.srv, testConfig(), 42, SwapName("t"), c.rerr)
			if swapped != c.swapped {
				t.Errorf("swapped = %v, want %v (err %v)", swapped, c.swapped, err)
			}
			if got := errors.Is(err, ErrOutcomeUnknown); got != c.unknown {
				t.Errorf("outcome unknown = %v, want %v (err %v)", got, c.unknown, err)
			}
			if len(c.srv.killed) != 1 || c.srv.killed[0] != 42 {
				t.Errorf("the swap session was not killed first: %v", c.srv.killed)
			}
			if got := len(c.srv.renamed) > 0; got != c.renamedBack {
				t.Errorf("renamed back = %v (%v), want %v", got, c.srv.renamed, c.renamedBack)
			}
			if c.renamedBack && !strings.Contains(c.srv.renamed[0], "`t_rcnew` -> `s`.`_t_new`") {
				t.Errorf("renamed %v", c.srv.renamed)
			}
			if c.unknown && len(c.srv.renamed) > 0 {
				t.Errorf("outcome unknown, yet renamed %v", c.srv.renamed)
			}
		})
	}
}

// TestResolveSwapUnderLock: on MySQL the ghost keeps its name during the
// swap (swapUnderLock renames T and the ghost in one RENAME under the
// lock), so "not done" needs no renaming back.
func TestResolveSwapUnderLock(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name             string
		tabs             map[string]string
		swapped, unknown bool
	}{
		{"RENAME committed", map[string]string{"t": "", "t_rcsentry": ""}, true, false},
		{"RENAME not done", map[string]string{"t": "", "_t_new": ""}, false, false},
		{"the table is gone", map[string]string{"_t_new": ""}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := &fakeServer{tabs: c.tabs}
			swapped, err := resolveSwap(ctx, srv, testConfig(), 42, "_t_new", errLost)
			if swapped != c.swapped || errors.Is(err, ErrOutcomeUnknown) != c.unknown {
				t.Errorf("swapped %v, err %v; want swapped %v, unknown %v", swapped, err, c.swapped, c.unknown)
			}
			if len(srv.renamed) > 0 || len(srv.killed) != 1 {
				t.Errorf("renamed %v, killed %v", srv.renamed, srv.killed)
			}
		})
	}
}
