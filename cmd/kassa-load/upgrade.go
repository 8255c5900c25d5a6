package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// "kassa-load upgrade" is the rolling-upgrade drill: two nodes of the previous release share a
// PostgreSQL database under the drill's mixed load, and are replaced by the current release
// (--kassa) one at a time, as an operator rolls an upgrade through a cluster: at a third of the run
// the second node is stopped (SIGTERM: the requests it holds finish) and started again from the new
// binary, which applies the new migrations while the first node, still the old release, keeps
// serving on the new schema and is restarted once on it; at two thirds the first node follows. The clients retry a refused
// connection on the other node with the same Idempotency-Key, as a load balancer's health check
// would send them there.
//
// It passes when the books balance (books.go: every request answered, the ledger equal to the
// acquirer's settlement, nothing charged twice) and no request failed: the upgrade is no outage, so
// a 5xx is counted against it. The acquirer answers every request, so that no 5xx is the
// connector's own.
//
// The previous release is a git revision (--from; by default the newest release that deploy/releases
// lists before the checked-out commit), built from the repository's history into a temporary directory.
//
// Usage:
//
//	kassa-load upgrade [--from v1.2.0] [--kassa bin/kassa] [--acquirer bin/kassa-acquirer]
//	           [--clients 16] [--duration 45s]
func upgradeMain(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("kassa-load upgrade", flag.ExitOnError)
	var c drillConfig
	var from string
	fs.StringVar(&from, "from", "", "the git revision of the previous release, which the nodes run first (default: the newest release in deploy/releases before HEAD)")
	// --kassa is the release the nodes are upgraded to; the acquirer drops no answer by default, so
	// that no 5xx is the connector's own.
	c.sharedFlags(fs, drillConfig{clients: 16, duration: 45 * time.Second, subscriptions: 10, settle: time.Minute},
		"how long the load lasts; the nodes are upgraded at a third and two thirds of it")
	fs.Parse(args)
	if c.clients < 1 || c.duration <= 0 {
		fmt.Fprintln(os.Stderr, "kassa-load upgrade: --clients >= 1, --duration > 0")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "kassa-load-previous-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "kassa-load upgrade: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	old, err := buildRelease(ctx, from, dir, out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kassa-load upgrade: %v\n", err)
		return 1
	}
	b, err := rollingUpgrade(ctx, c, old, out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kassa-load upgrade: %v\n", err)
		return 1
	}
	b.print(out)
	if !b.balanced() {
		fmt.Fprintln(out, "kassa-load upgrade: the books do not balance")
		return 1
	}
	return 0
}

// rollingUpgrade runs the drill and returns its books.
func rollingUpgrade(ctx context.Context, c drillConfig, from string, progress io.Writer) (*books, error) {
	next := c.kassa
	c.kassa = from
	r, err := newRig(ctx, c, "postgres", 2)
	if err != nil {
		return nil, err
	}
	defer r.close()
	fmt.Fprintf(progress, "upgrade: 2 nodes of %s up, %d subscriptions, load for %v, each node upgraded to %s in turn\n", from, r.subs, c.duration, next)

	start := time.Now()
	runCtx, stopRun := context.WithTimeout(ctx, c.duration)
	defer stopRun()
	var wg sync.WaitGroup
	upgraded := make(chan error, 1)
	wg.Go(func() {
		upgraded <- func() error {
			for i, at := range []time.Duration{c.duration / 3, 2 * c.duration / 3} {
				if err := once(runCtx, at-time.Since(start), func() error {
					nd := r.nodes[len(r.nodes)-1-i]
					took := time.Now()
					if err := nd.replace(ctx, next); err != nil {
						return err
					}
					fmt.Fprintf(progress, "upgrade: %s runs %s (stopped and started in %.1f s)\n", nd.name, next, time.Since(took).Seconds())
					if i > 0 {
						return nil
					}
					// An old node restarted mid-way, as a supervisor restarts one, starts on the
					// newer schema: its migrations are all applied, and the newer ones are not its own.
					old := r.nodes[0]
					if err := old.replace(ctx, from); err != nil {
						return fmt.Errorf("%s of the previous release, restarted on the new schema: %w", old.name, err)
					}
					fmt.Fprintf(progress, "upgrade: %s of the previous release restarted on the new schema\n", old.name)
					return nil
				}); err != nil {
					return err
				}
			}
			return nil
		}()
	})
	wg.Go(func() { r.load(runCtx, c) })
	wg.Wait()
	if err := <-upgraded; err != nil {
		return nil, err
	}
	for _, nd := range r.nodes {
		if nd.bin != next {
			return nil, fmt.Errorf("%s was not upgraded within the run: make --duration longer", nd.name)
		}
	}
	r.cli.bin = next // the operator's tools are the new release's once it is rolled out
	return r.books(ctx, c, start)
}

// releasesFile lists the releases, from the repository's root: one "tag commit" per line, oldest first.
// The drill takes its previous release from it rather than from git tags, which a clone of one branch
// does not carry.
const releasesFile = "deploy/releases"

// buildRelease builds the kassa of the git revision rev ("": the previous release, see previousRelease)
// into dir and returns its path. A shallow clone fetches its history from origin first.
func buildRelease(ctx context.Context, rev, dir string, progress io.Writer) (string, error) {
	git := gitIn(ctx, "")
	top, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return "", err
	}
	resolve := func() (string, error) {
		if rev != "" {
			return git("rev-parse", "--verify", rev+"^{commit}")
		}
		return previousRelease(git, filepath.Join(top, releasesFile))
	}
	found, err := resolve()
	if err != nil {
		if shallow, _ := git("rev-parse", "--is-shallow-repository"); shallow != "true" {
			return "", fmt.Errorf("no previous release: %v", err)
		}
		if _, ferr := git("fetch", "--quiet", "--unshallow", "origin"); ferr != nil {
			return "", fmt.Errorf("no previous release (%v), and fetching the history failed: %v", err, ferr)
		}
		if found, err = resolve(); err != nil {
			return "", fmt.Errorf("no previous release: %v", err)
		}
	}
	if rev == "" {
		rev = found
	}
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o700); err != nil {
		return "", err
	}
	archive := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", top, rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %v %s", rev, err, out)
	}
	bin := filepath.Join(dir, "kassa")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/kassa")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build kassa %s: %v\n%s", rev, err, out)
	}
	fmt.Fprintf(progress, "upgrade: the previous release is %s, built\n", rev)
	return bin, nil
}

// previousRelease is the newest release listed in the file releases whose commit is in the history
// of HEAD and is not HEAD itself: the release an operator upgrades from to the checked-out commit.
func previousRelease(git func(args ...string) (string, error), releases string) (string, error) {
	b, err := os.ReadFile(releases)
	if err != nil {
		return "", err
	}
	head, err := git("rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		f := strings.Fields(lines[i])
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 2 {
			return "", fmt.Errorf("%s: %q is not \"tag commit\"", releases, lines[i])
		}
		commit, err := git("rev-parse", "--verify", "--quiet", f[1]+"^{commit}")
		if err != nil {
			return "", fmt.Errorf("%s: the commit of %s is not in this clone: %v", releases, f[0], err)
		}
		if commit == head {
			continue
		}
		if _, err := git("merge-base", "--is-ancestor", commit, head); err == nil {
			return commit, nil
		}
	}
	return "", fmt.Errorf("%s lists no release before HEAD", releases)
}

// gitIn returns a runner of git in dir ("": the working directory) that answers git's output, trimmed,
// or an error carrying its stderr.
func gitIn(ctx context.Context, dir string) func(args ...string) (string, error) {
	return func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			return "", fmt.Errorf("git %s: %v %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr))
		}
		return strings.TrimSpace(string(out)), nil
	}
}

// replace stops the node as an operator does (SIGTERM: the requests it holds finish) and starts bin in
// its place, on the same address.
func (n *node) replace(ctx context.Context, bin string) error {
	n.k.stop()
	n.bin = bin
	return n.start(ctx)
}
