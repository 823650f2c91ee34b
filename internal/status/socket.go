package status

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SocketHelp lists the commands the unix socket accepts: gh-ost's words,
// and recast's settings by their own names.
const SocketHelp = `# recast accepts gh-ost's interactive commands, one per line:
status, info, sup    # status (sup: one line)
coordinates          # the binlog position applied to the new table (file:offset)
throttle             # pause the row copy (same as POST /pause)
no-throttle, unthrottle  # end the pause (POST /resume)
chunk-size=N         # cap chunks at N rows (recast sizes chunks by --chunk-time; this sets --max-chunk-rows)
max-lag-millis=N     # --max-lag in milliseconds
max-load=VAR=N[,..]  # --max-load
critical-load=...    # --critical-load
throttle-query=SQL   # --throttle-query from now on (empty: none)
max-latency-ratio=R  # --max-latency-ratio (0: stop pacing; only in a run started with it)
nice-ratio=R         # --nice-ratio: sleep R × each chunk's time after it (0: no sleep)
max-copy-rate=N      # --max-copy-rate: at most N rows a second while the application is active (0: no cap)
min-copy-rate=N      # --min-copy-rate: the pacer never slows the copy below N rows a second (0: no floor)
unpostpone, no-postpone  # cut over now instead of waiting for the postpone flag file (POST /cutover)
panic                # abort the migration (POST /abort)
threads=N, chunk-time=D, max-chunk-rows=N, max-lag=D   # recast's own names (POST /set)
KEY=?                # print the current value of a setting
help                 # this text
`

// SocketServer serves gh-ost's interactive commands on a unix socket.
type SocketServer struct {
	ln   net.Listener
	path string
	c    Controller
	log  *slog.Logger
	wg   sync.WaitGroup
}

// ListenSocket serves c on the unix socket path (a stale socket file is
// replaced; another file there is an error).
func ListenSocket(path string, c Controller, log *slog.Logger) (*SocketServer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("--serve-socket-file %s: exists and is not a socket", path)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := (&net.Dialer{}).DialContext(ctx, "unix", path)
		cancel()
		if err == nil {
			conn.Close()
			return nil, fmt.Errorf("--serve-socket-file %s: another process serves it", path)
		}
		os.Remove(path)
	}
	ln, err := listenPrivate(path)
	if err != nil {
		return nil, fmt.Errorf("--serve-socket-file %s: %w", path, err)
	}
	s := &SocketServer{ln: ln, path: path, c: c, log: log}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// listenPrivate listens on the unix socket path with mode 0600 from the
// start: the socket is bound in a new directory of mode 0700 next to path,
// given mode 0600, then renamed to path (no moment where another user may
// connect).
func listenPrivate(path string) (net.Listener, error) {
	dir, err := os.MkdirTemp(filepath.Dir(path), ".recast-sock-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // Close removes path itself
	if err := os.Chmod(tmp, 0o600); err != nil {
		_ = ln.Close()
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

func (s *SocketServer) serve() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Warn("socket: accept failed", "err", err)
			}
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer conn.Close()
			if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
				return
			}
			sc := bufio.NewScanner(conn)
			for sc.Scan() {
				line := strings.TrimSpace(sc.Text())
				if line == "" {
					continue
				}
				out := s.Command(line)
				s.log.Info("socket command", "command", line)
				if _, err := io.WriteString(conn, out); err != nil {
					s.log.Debug("socket: reply not sent", "err", err)
					return
				}
			}
		}()
	}
}

// Close stops serving and removes the socket file.
func (s *SocketServer) Close() error {
	err := s.ln.Close()
	s.wg.Wait()
	os.Remove(s.path)
	return err
}

// Command runs one command line and returns the answer (newline-ended).
func (s *SocketServer) Command(line string) string { return Command(s.c, line) }

// Command runs one gh-ost-style command against c.
func Command(c Controller, line string) string {
	cmd, arg, hasArg := strings.Cut(strings.TrimSpace(line), "=")
	cmd = strings.ToLower(strings.TrimSpace(cmd))
	arg = strings.TrimSpace(arg)
	fail := func(err error) string { return "ERROR: " + oneLine(err.Error()) + "\n" }
	ok := func(msg string) string { return msg + "\n" }
	if cmd != "help" && !(hasArg && arg == "?") {
		// The socket has no request context; the hooks are time-limited
		// by --hooks-timeout.
		if err := interactiveHook(context.Background(), c, strings.TrimSpace(line)); err != nil {
			return fail(err)
		}
	}
	if hasArg && arg == "?" {
		v, err := current(c.Status().Settings, cmd)
		if err != nil {
			return fail(err)
		}
		return ok(v)
	}
	switch {
	case cmd == "help":
		return SocketHelp
	case (cmd == "status" || cmd == "info") && !hasArg:
		return c.Status().Text()
	case cmd == "coordinates" && !hasArg:
		if p := c.Status().Apply.AppliedPosition; p != "" {
			return ok(p)
		}
		return fail(errors.New("no binlog position applied yet (the applier starts with the copy)"))
	case cmd == "sup" && !hasArg:
		s := c.Status()
		line := fmt.Sprintf("phase %s; copy %.1f%% (%d/~%d rows); backlog %d events; ETA %s", s.Phase, s.Copy.Percent, s.Copy.RowsCopied, s.Copy.RowsEstimated, s.Apply.BacklogEvents, s.ETA.Text)
		if s.Throttle.Throttled {
			line += "; throttled: " + s.Throttle.Reason
		}
		return ok(line)
	case (cmd == "throttle" || cmd == "pause") && !hasArg:
		if err := c.Pause(); err != nil {
			return fail(err)
		}
		return ok("throttled (paused by operator)")
	case (cmd == "no-throttle" || cmd == "unthrottle" || cmd == "resume") && !hasArg:
		if err := c.Resume(); err != nil {
			return fail(err)
		}
		return ok("no longer paused by operator")
	case (cmd == "unpostpone" || cmd == "no-postpone" || cmd == "cutover" || cmd == "cut-over") && !hasArg:
		if err := c.Unpostpone(); err != nil {
			return fail(err)
		}
		return ok("cut-over no longer postponed")
	case (cmd == "panic" || cmd == "abort") && !hasArg:
		if err := c.Abort("panic command on the socket"); err != nil {
			return fail(err)
		}
		return ok("aborting")
	case hasArg:
		key, val := cmd, arg
		switch cmd {
		case "chunk-size":
			key = "max-chunk-rows"
		case "max-lag-millis":
			n, err := strconv.ParseInt(arg, 10, 64)
			if err != nil || n < 0 {
				return fail(fmt.Errorf("max-lag-millis=%s: want a number of milliseconds", arg))
			}
			key, val = "max-lag", (time.Duration(n) * time.Millisecond).String()
		}
		if err := c.Set(key, val); err != nil {
			return fail(err)
		}
		return ok(cmd + "=" + arg + " set")
	}
	return fail(fmt.Errorf("unknown command %q (try help)", line))
}

// current is a setting's value in gh-ost's terms.
func current(st Settings, key string) (string, error) {
	switch key {
	case "chunk-size", "max-chunk-rows":
		return strconv.Itoa(st.MaxChunkRows), nil
	case "max-lag-millis":
		d, _ := time.ParseDuration(st.MaxLag)
		return strconv.FormatInt(d.Milliseconds(), 10), nil
	case "max-lag":
		return st.MaxLag, nil
	case "max-load":
		return st.MaxLoad, nil
	case "critical-load":
		return st.CriticalLoad, nil
	case "threads":
		return strconv.Itoa(st.Threads), nil
	case "chunk-time":
		return st.ChunkTime, nil
	case "throttle-query":
		return st.ThrottleQuery, nil
	case "max-latency-ratio":
		return strconv.FormatFloat(st.MaxLatencyRatio, 'g', -1, 64), nil
	case "nice-ratio":
		return strconv.FormatFloat(st.NiceRatio, 'g', -1, 64), nil
	case "max-copy-rate":
		return strconv.FormatFloat(st.MaxCopyRate, 'g', -1, 64), nil
	case "min-copy-rate":
		return strconv.FormatFloat(st.MinCopyRate, 'g', -1, 64), nil
	}
	return "", fmt.Errorf("unknown setting %q", key)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
