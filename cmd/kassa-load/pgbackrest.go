package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kassapay/kassa/internal/pgcluster"
)

// pgBackRest is a pgBackRest repository on this machine for one cluster, stanza "kassa": the
// point-in-time recovery drill's. It is configured as deploy/ha/pgbackrest.conf is (fast start, zstd,
// synchronous archiving here) with the repository in a local directory rather than S3, unencrypted.
type pgBackRest struct {
	dir  string // the configuration, repository, logs and locks, owned by PostgreSQL's user
	conf string
	cred *syscall.Credential // PostgreSQL's user, which archive_command runs as: every command runs as it
}

// newPgBackRest makes an empty repository; configure names the cluster it backs up.
func newPgBackRest() (*pgBackRest, error) {
	if _, err := exec.LookPath("pgbackrest"); err != nil {
		return nil, fmt.Errorf("pgbackrest not found (apt-get install pgbackrest): %w", err)
	}
	cred, err := pgcluster.RunAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kassa-pgbackrest-")
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	return &pgBackRest{dir: dir, conf: filepath.Join(dir, "pgbackrest.conf"), cred: cred}, nil
}

// archiveCommand is the cluster's archive_command.
func (b *pgBackRest) archiveCommand() string {
	return "pgbackrest --config=" + b.conf + " --stanza=kassa archive-push %p"
}

// configure writes the configuration for cluster c and creates the stanza. Until it is written, c's
// archiver's attempts fail and are retried by PostgreSQL: no segment is skipped.
func (b *pgBackRest) configure(ctx context.Context, c *pgcluster.Cluster) error {
	conf := fmt.Sprintf(`[global]
repo1-path=%s
log-path=%s
lock-path=%s
log-level-console=warn
log-level-file=off
start-fast=y
compress-type=zst
process-max=2
repo1-retention-full=2

[kassa]
pg1-path=%s
pg1-socket-path=%s
pg1-user=kassa
`, filepath.Join(b.dir, "repo"), b.dir, b.dir, c.DataDir(), c.Dir())
	if err := os.WriteFile(b.conf, []byte(conf), 0o644); err != nil {
		return err
	}
	_, err := b.run(ctx, "stanza-create")
	return err
}

// run runs pgbackrest with the configuration, on the stanza, as PostgreSQL's user.
func (b *pgBackRest) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "pgbackrest", append([]string{"--config=" + b.conf, "--stanza=kassa"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.cred}
	cmd.Dir = b.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("pgbackrest %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// restoreTo is a pgcluster.Options.Fill that restores the newest backup into a new data directory
// and has recovery replay the archived WAL up to target (PostgreSQL's recovery_target_time: commits at
// or before it), then promote.
func (b *pgBackRest) restoreTo(ctx context.Context, target string) func(string, *syscall.Credential) error {
	return func(data string, cred *syscall.Credential) error {
		if err := os.Mkdir(data, 0o700); err != nil {
			return err
		}
		if cred != nil {
			if err := os.Chown(data, int(cred.Uid), int(cred.Gid)); err != nil {
				return err
			}
		}
		_, err := b.run(ctx, "restore", "--pg1-path="+data, "--type=time", "--target="+target, "--target-action=promote")
		return err
	}
}

func (b *pgBackRest) close() { os.RemoveAll(b.dir) }
