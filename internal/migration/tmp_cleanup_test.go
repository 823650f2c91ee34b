package migration

import (
	"os"
	"path/filepath"
)

// removeRecastBinary removes the directory recastBinary built the faultinject
// binary into (once per test binary, so it is removed from TestMain).
func removeRecastBinary() {
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
}
