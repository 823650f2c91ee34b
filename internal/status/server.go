package status

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

//go:embed page.html
var page []byte

// Header is the request header every POST must carry (any value): a page
// of another site cannot send it without a CORS preflight, which the
// server does not answer, so it cannot steer the migration through the
// operator's browser.
const Header = "X-Recast"

// Handler serves the endpoints (see docs/control.md):
//
//	GET  /           the status page
//	GET  /status     Snapshot as JSON
//	GET  /history    []Sample as JSON (one a second, the last 15 minutes)
//	GET  /metrics    Prometheus text format
//	POST /pause, /resume, /cutover (alias /unpostpone), /abort[?reason=...]
//	POST /set        form or query values key=value (SettableKeys)
func Handler(c Controller, log *slog.Logger) http.Handler { return localOnly(handler(c, log)) }

func handler(c Controller, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(page) // an error means the client went away
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, c.Status()) })
	mux.HandleFunc("GET /history", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, c.History()) })
	mux.Handle("GET /metrics", promhttp.HandlerFor(Registry(c), promhttp.HandlerOpts{}))
	post := func(path string, f func(r *http.Request) (string, error)) {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(Header) == "" {
				writeJSON(w, http.StatusForbidden, reply{Error: "missing the " + Header + " header (recast ctl sends it)"})
				return
			}
			if err := interactiveHook(r.Context(), c, strings.TrimPrefix(path, "/")+formText(r)); err != nil {
				writeJSON(w, http.StatusBadRequest, reply{Error: err.Error()})
				return
			}
			msg, err := f(r)
			if err != nil {
				writeJSON(w, http.StatusBadRequest, reply{Error: err.Error()})
				return
			}
			log.Info("control: "+strings.TrimPrefix(path, "/"), "from", r.RemoteAddr, "result", msg)
			writeJSON(w, http.StatusOK, reply{OK: true, Message: msg})
		})
	}
	post("/pause", func(*http.Request) (string, error) {
		return "paused: the row copy stops after the chunks in flight", c.Pause()
	})
	post("/resume", func(*http.Request) (string, error) { return "resumed (other throttle reasons still apply)", c.Resume() })
	unpostpone := func(*http.Request) (string, error) { return "cut-over no longer postponed", c.Unpostpone() }
	post("/cutover", unpostpone)
	post("/unpostpone", unpostpone)
	post("/abort", func(r *http.Request) (string, error) {
		reason := r.FormValue("reason")
		if reason == "" {
			reason = "aborted by operator"
		}
		return "aborting: " + reason, c.Abort(reason)
	})
	post("/set", func(r *http.Request) (string, error) {
		if err := r.ParseForm(); err != nil {
			return "", err
		}
		if len(r.Form) == 0 {
			return "", fmt.Errorf("nothing to set: give key=value, keys %s", strings.Join(SettableKeys, ", "))
		}
		keys := make([]string, 0, len(r.Form))
		for k := range r.Form {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var done []string
		for _, k := range keys {
			v := r.Form.Get(k)
			if err := c.Set(k, v); err != nil {
				return strings.Join(done, ", "), err
			}
			done = append(done, k+"="+v)
		}
		return "set " + strings.Join(done, ", "), nil
	})
	return mux
}

type reply struct {
	OK      bool   `json:"ok"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the values encode; an error means the client went away
}

// localOnly refuses requests whose Host is a name other than localhost
// (DNS rebinding: a page of another site whose name now points at
// 127.0.0.1 would otherwise be same-origin).
func localOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			host = hh
		}
		if host != "localhost" && net.ParseIP(strings.Trim(host, "[]")) == nil {
			http.Error(w, "recast: requests must address the server by IP or localhost", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Server is a running HTTP endpoint.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Listen starts serving c on addr (host:port; port 0 picks one).
func Listen(addr string, c Controller, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http %s: %w", addr, err)
	}
	return serveOn(ln, Handler(c, log), log), nil
}

func serveOn(ln net.Listener, h http.Handler, log *slog.Logger) *Server {
	s := &Server{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.Warn("status endpoint stopped", "err", err)
		}
	}()
	return s
}

// Addr is the address it listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops it.
func (s *Server) Close() error { return s.srv.Close() }

// hooked is implemented by a Controller that runs the user's
// on-interactive-command hooks (package migration's Control, --hooks-path).
type hooked interface {
	InteractiveCommand(ctx context.Context, command string) error
}

// interactiveHook runs the on-interactive-command hooks for a command
// received on the HTTP endpoint or the socket; a failing hook refuses the
// command, as in gh-ost.
func interactiveHook(ctx context.Context, c Controller, command string) error {
	if h, ok := c.(hooked); ok {
		return h.InteractiveCommand(ctx, command)
	}
	return nil
}

// formText is a POST's form as " k=v k=v" (sorted), for the hooks.
func formText(r *http.Request) string {
	if err := r.ParseForm(); err != nil || len(r.PostForm) == 0 {
		return ""
	}
	keys := make([]string, 0, len(r.PostForm))
	for k := range r.PostForm {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(" " + k + "=" + r.PostForm.Get(k))
	}
	return b.String()
}
