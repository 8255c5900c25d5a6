package main

import (
	"runtime/debug"
	"testing"
)

// The version line names, first found, the version make build gave the binary, the module version
// the Go toolchain stamped, or the newest release with "-dev"; it adds the commit, its time and local
// changes when the toolchain's VCS stamp has them, and the Go version when there is build
// information at all.
func TestVersionLine(t *testing.T) {
	stamped := func(version string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/kassapay/kassa", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	const rev = "f2a60bc522f237c5e2f7c2f1b6e91564e440a0bf"
	for _, c := range []struct {
		name, built string
		bi          *debug.BuildInfo
		newest      string
		want        string
	}{
		{"make build from a tagged checkout", "v0.9.0-75-gf2a60bc", stamped("v0.9.1-0.20261128145338-f2a60bc522f2", "vcs.revision", rev, "vcs.time", "2026-11-28T14:53:38Z", "vcs.modified", "false"), "v0.9.0",
			"kassa v0.9.0-75-gf2a60bc (commit " + rev + " of 2026-11-28T14:53:38Z, go1.26.8)"},
		{"go build from a checkout with local changes", "", stamped("v0.9.1-0.20261128145338-f2a60bc522f2+dirty", "vcs.revision", rev, "vcs.modified", "true"), "v0.9.0",
			"kassa v0.9.1-0.20261128145338-f2a60bc522f2+dirty (commit " + rev + " with local changes, go1.26.8)"},
		{"make build in a git worktree", "v0.9.0-75-gf2a60bc-dirty", stamped("(devel)"), "v0.9.0",
			"kassa v0.9.0-75-gf2a60bc-dirty (go1.26.8)"},
		{"go run", "", stamped("(devel)"), "v0.9.0", "kassa v0.9.0-dev (go1.26.8)"},
		{"no build information", "", nil, "v0.9.0", "kassa v0.9.0-dev"},
		{"no release listed", "", stamped(""), "", "kassa v0.0.0-dev (go1.26.8)"},
	} {
		if got := versionLine(c.built, c.bi, c.newest); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
