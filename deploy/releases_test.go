package deploy_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/kassapay/kassa/deploy"
)

// Every line of the releases file is a comment or "tag commit", the tag a semantic version and the
// commit a full git hash, and NewestRelease is the tag of the last one, the name kassa version gives a
// development build.
func TestReleases(t *testing.T) {
	t.Parallel()
	release := regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*) [0-9a-f]{40}$`)
	last := ""
	for line := range strings.Lines(read(t, "deploy/releases")) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !release.MatchString(line) {
			t.Errorf("deploy/releases: %q is not \"vMAJOR.MINOR.PATCH commit\"", line)
		}
		last, _, _ = strings.Cut(line, " ")
	}
	if last == "" || deploy.NewestRelease() != last {
		t.Fatalf("NewestRelease is %q, the file's last release %q", deploy.NewestRelease(), last)
	}
}
