// Package buildinfo holds the version stamped into the occ binary at link
// time. The Makefile sets both variables:
//
//	go build -ldflags "-X github.com/openclaw/occ/internal/buildinfo.Version=$(git describe --always --dirty) \
//	                   -X github.com/openclaw/occ/internal/buildinfo.Commit=$(git rev-parse HEAD)"
//
// They stay "dev" for a plain go build or go run, which is honest: such a
// binary was built from a work tree, not from a release. (The module's
// VCS stamping is no help here: these machines build with -buildvcs=false.)
package buildinfo

import "runtime"

// Set with -ldflags -X; they must stay plain string variables for that.
var (
	// Version is the release or `git describe` name of the build.
	Version = "dev"
	// Commit is the full commit hash the binary was built from.
	Commit = "dev"
)

// GoVersion is the Go toolchain that built the binary, with its target
// platform, e.g. "go1.26.8 linux/amd64".
func GoVersion() string {
	return runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}
