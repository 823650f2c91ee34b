package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Flavors are the servers a sandbox can run. The first is the locally
// installed package; the others are fetched by scripts/fetch-flavor.sh into
// the flavor cache (FlavorCache) and run through their unpacked loader.
var Flavors = []string{"mariadb-10.11", "mariadb-11.8", "mysql-9.7"}

// DefaultFlavor is the installed MariaDB.
const DefaultFlavor = "mariadb-10.11"

// binaries are the programs that run one flavor.
type binaries struct {
	flavor    string
	mysql     bool   // MySQL (initialise with --initialize-insecure), not MariaDB
	server    string // mariadbd or mysqld (maybe a wrapper script)
	installDB string // mariadb-install-db (MariaDB only)
	baseDir   string // --basedir for installDB ("" for the installed package)
}

// FlavorCache is where scripts/fetch-flavor.sh unpacks fetched flavors:
// $RECAST_FLAVOR_CACHE, else $XDG_CACHE_HOME/recast/flavors, else
// ~/.cache/recast/flavors (the script uses the same rule).
func FlavorCache() (string, error) {
	if d := os.Getenv("RECAST_FLAVOR_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "recast", "flavors"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("sandbox: flavor cache: set RECAST_FLAVOR_CACHE: %w", err)
	}
	return filepath.Join(home, ".cache", "recast", "flavors"), nil
}

// ErrFlavorMissing is wrapped by Up's error when a fetched flavor is not in
// the cache and could not be fetched.
var ErrFlavorMissing = errors.New("server flavor not available")

// findFlavor returns the binaries of flavor, fetching it with
// scripts/fetch-flavor.sh (searched from the working directory upwards) when
// it is not cached yet.
func findFlavor(ctx context.Context, flavor string) (binaries, error) {
	switch flavor {
	case "", DefaultFlavor:
		server, err := findBinary("mariadbd", "mysqld")
		if err != nil {
			return binaries{}, err
		}
		installDB, err := findBinary("mariadb-install-db", "mysql_install_db")
		if err != nil {
			return binaries{}, err
		}
		return binaries{flavor: DefaultFlavor, server: server, installDB: installDB}, nil
	case "mariadb-11.8", "mysql-9.7":
	default:
		return binaries{}, fmt.Errorf("sandbox: unknown flavor %q (known: %s)", flavor, strings.Join(Flavors, ", "))
	}
	cache, err := FlavorCache()
	if err != nil {
		return binaries{}, err
	}
	base := filepath.Join(cache, flavor)
	if _, err := os.Stat(filepath.Join(base, "VERSION")); errors.Is(err, fs.ErrNotExist) {
		if err := fetchFlavor(ctx, flavor); err != nil {
			return binaries{}, err
		}
	}
	b := binaries{flavor: flavor, baseDir: base}
	if strings.HasPrefix(flavor, "mysql-") {
		b.mysql = true
		b.server = filepath.Join(base, "sbin", "mysqld")
	} else {
		b.server = filepath.Join(base, "sbin", "mariadbd")
		b.installDB = filepath.Join(base, "bin", "mariadb-install-db")
	}
	for _, p := range []string{b.server, b.installDB} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			return binaries{}, fmt.Errorf("sandbox: %w: %s: %w (refetch with FORCE=1 scripts/fetch-flavor.sh %s)", ErrFlavorMissing, flavor, err, flavor)
		}
	}
	return b, nil
}

// fetchFlavor runs scripts/fetch-flavor.sh FLAVOR.
func fetchFlavor(ctx context.Context, flavor string) error {
	script, err := findFetchScript()
	if err != nil {
		return fmt.Errorf("sandbox: %w: %s is not in the flavor cache and %w; run scripts/fetch-flavor.sh %s in the recast repository",
			ErrFlavorMissing, flavor, err, flavor)
	}
	cmd := exec.CommandContext(ctx, "bash", script, flavor)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("sandbox: %w: %s %s failed: %w\n%s", ErrFlavorMissing, script, flavor, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func findFetchScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "fetch-flavor.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("scripts/fetch-flavor.sh was not found above the working directory")
		}
		dir = parent
	}
}
