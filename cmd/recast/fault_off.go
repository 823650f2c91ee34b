//go:build !faultinject

package main

import (
	"context"
	"io"
)

// faultPause is a no-op in normal builds; see fault_on.go.
func faultPause(io.Writer) func(context.Context, string) { return nil }
