package deploy

import (
	_ "embed"
	"strings"
)

// releases is the releases file, one "tag commit" line per release, oldest first, and comment lines
// starting with "#".
//
//go:embed releases
var releases string

// NewestRelease is the tag of the newest release the releases file lists (its last "tag commit" line),
// or "" when it lists none. A binary built from a commit after that release is a development build of
// what follows it (kassa version).
func NewestRelease() string {
	newest := ""
	for line := range strings.Lines(releases) {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(f[0], "#") {
			newest = f[0]
		}
	}
	return newest
}
