//go:build faultinject

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// faultPause, in binaries built with -tags faultinject (tests only), stops
// the migration for good at the pause point named by RECAST_PAUSE_AT (one
// of migration's points: ghost-created, copy-done, caught-up,
// checksum:round1, cutover:locked, cutover:drained, cutover:rename-waiting,
// cutover:sentry-dropped, ...), after printing "PAUSED <point>" on stderr, so
// that a test can kill the process exactly there.
func faultPause(stderr io.Writer) func(context.Context, string) {
	at := os.Getenv("RECAST_PAUSE_AT")
	if at == "" {
		return nil
	}
	return func(ctx context.Context, point string) {
		if !strings.EqualFold(point, at) {
			return
		}
		fmt.Fprintf(stderr, "PAUSED %s\n", point)
		<-ctx.Done()
		select {} // never return: the test kills the process here
	}
}
