package status

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
)

// TokenCookie carries the token of the status page in a browser: opening
// /?token=T sets it (then every request of the page sends it).
const TokenCookie = "recast_token"

// requireToken serves h only to requests that carry token: the header
// "Authorization: Bearer <token>", or the cookie set by /?token=<token>.
// Tokens are compared in constant time.
func requireToken(token string, h http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	match := func(got string) bool {
		g := sha256.Sum256([]byte(got))
		return subtle.ConstantTimeCompare(g[:], want[:]) == 1
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && match(strings.TrimSpace(auth)) {
			h.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(TokenCookie); err == nil && match(c.Value) {
			h.ServeHTTP(w, r)
			return
		}
		if q := r.URL.Query().Get("token"); q != "" && r.Method == http.MethodGet && r.URL.Path == "/" && match(q) {
			// The page: keep the token in a cookie and drop it from the URL.
			http.SetCookie(w, &http.Cookie{Name: TokenCookie, Value: q, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="recast"`)
		writeJSON(w, http.StatusUnauthorized, reply{Error: "missing or wrong token: send Authorization: Bearer <--http-token> (recast ctl --http-token or $RECAST_HTTP_TOKEN; the page: /?token=<token>)"})
	})
}

// Loopback reports whether the listener only accepts connections from
// this machine (127.0.0.0/8, ::1).
func Loopback(ln net.Listener) bool {
	a, ok := ln.Addr().(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// ListenAuth starts serving c on addr. Without a token it serves only on
// a loopback address (anyone who can reach the port can abort or cut over
// the migration); with a token every request must carry it.
func ListenAuth(addr, token string, c Controller, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http %s: %w", addr, err)
	}
	if token == "" && !Loopback(ln) {
		_ = ln.Close() // nothing was served
		return nil, fmt.Errorf("--http %s listens beyond this machine (%s): anyone who reaches it could abort or cut over the migration; fix: give --http-token (or $RECAST_HTTP_TOKEN), or listen on 127.0.0.1", addr, ln.Addr())
	}
	h := Handler(c, log)
	if token != "" {
		// The token authenticates; the Host check (against DNS rebinding
		// of a token-less loopback endpoint) would refuse real host names.
		h = requireToken(token, handler(c, log))
	}
	return serveOn(ln, h, log), nil
}

// Loopback reports whether s listens on a loopback address only.
func (s *Server) Loopback() bool { return Loopback(s.ln) }
