package main

import (
	"bufio"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// probeCmd runs recast's pacing probe from outside recast, for the whole of
// a bench run: a one-row autocommit upsert every --every on a connection of
// its own, into a table of its own (bench_meta.probe). It logs each probe's
// start and latency, so that the probe's latency before and during a
// migration can be set against sysbench's p99 (bench/ab.sh --probe): what
// the pacer sees, whatever recast's own baseline and decisions were. Lines
// of --out:
//
//	<unix ms at the probe's start> <latency µs> <0, or 1: the probe failed>
//
// It runs until SIGINT/SIGTERM.
func probeCmd(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:14306", "server host:port")
	user := fs.String("user", "recast", "user")
	password := fs.String("password", "recast", "password")
	every := fs.Duration("every", 50*time.Millisecond, "time between probes' starts (recast's: 50ms)")
	out := fs.String("out", "", "output file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("--out is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	db, err := openDB(*addr, *user, *password)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS bench_meta",
		"CREATE TABLE IF NOT EXISTS bench_meta.probe (id INT PRIMARY KEY, seq INT NOT NULL, ts DATETIME(6))",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	defer func() { w.Flush(); f.Close() }()
	var conn *sql.Conn
	t := time.NewTicker(*every)
	defer t.Stop()
	for ctx.Err() == nil {
		start := time.Now()
		if conn == nil {
			conn, err = db.Conn(ctx)
		}
		if err == nil {
			_, err = conn.ExecContext(ctx, "INSERT INTO bench_meta.probe (id, seq, ts) VALUES (2, 0, UTC_TIMESTAMP(6))"+
				" ON DUPLICATE KEY UPDATE ts = VALUES(ts)")
			if err != nil {
				conn.Close()
				conn = nil
			}
		}
		if ctx.Err() != nil {
			break
		}
		failed := 0
		if err != nil {
			failed = 1
		}
		fmt.Fprintf(w, "%d %d %d\n", start.UnixMilli(), time.Since(start).Microseconds(), failed)
		err = nil
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	if conn != nil {
		conn.Close()
	}
	return nil
}
