// Command mkdeb builds recast's .deb from an nfpm configuration with nfpm's
// deb packager (make package). It is a module of its own: nfpm's command
// links every packager, and the module proxy refuses some of the rpm and
// msix packagers' modules; the deb packager needs none of them.
//
//	go run . -config ../nfpm.yaml -target DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
)

func main() {
	config := flag.String("config", "", "nfpm configuration (environment variables are expanded)")
	target := flag.String("target", ".", "directory for the .deb")
	flag.Parse()
	path, err := build(*config, *target)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mkdeb: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(path)
}

func build(config, dir string) (string, error) {
	cfg, err := nfpm.ParseFileWithEnvMapping(config, os.Getenv)
	if err != nil {
		return "", err
	}
	info, err := cfg.Get("deb")
	if err != nil {
		return "", err
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return "", err
	}
	path := filepath.Join(dir, deb.Default.ConventionalFileName(info))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	info.Target = path
	if err := deb.Default.Package(info, f); err != nil {
		f.Close()
		os.Remove(path)
		return "", err
	}
	return path, f.Close()
}
