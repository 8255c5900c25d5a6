// Package pgcluster starts a throwaway PostgreSQL cluster from the system's initdb and postgres
// binaries (Debian package "postgresql"), in a temporary directory, listening only on a Unix socket
// there. Tests use one with durability off; the load benchmark uses one with durable commits.
package pgcluster

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, to wait for the server
)

// Cluster is a running throwaway cluster.
type Cluster struct {
	dir  string
	cmd  *exec.Cmd
	logf *os.File // the server's log, which a restart appends to
	// URL connects to its "postgres" database as the superuser "kassa".
	URL string
}

// Options configure a cluster.
type Options struct {
	// Durable keeps fsync, full_page_writes and synchronous_commit on, as in production. Off, the
	// cluster is faster and loses nothing that tests need: they kill Kassa, never PostgreSQL.
	Durable bool
	// Settings are extra "name=value" server settings.
	Settings []string
	// Fill, when set, fills the data directory data (not yet created) instead of initdb: a restore
	// from a backup, as the point-in-time recovery drill makes. Commands that write to it must run
	// with the credential cred (see RunAs).
	Fill func(data string, cred *syscall.Credential) error
}

// BinDir finds the directory of initdb, postgres and the other server programs (pg_controldata,
// pg_rewind, …): initdb's on PATH, followed through symbolic links (a link on PATH may stand for
// initdb alone), or Debian's /usr/lib/postgresql/N/bin.
func BinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("initdb not found on PATH or in /usr/lib/postgresql/*/bin (install Debian's postgresql package)")
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Available reports why a cluster cannot be started here, or nil: the binaries are missing, or this
// process runs as root and there is no postgres user to run them as.
func Available() error {
	if _, err := BinDir(); err != nil {
		return err
	}
	_, err := RunAs()
	return err
}

// RunAs is the credential to run PostgreSQL with, which refuses to run as root: nil (this process's
// own) unless this process is root, then the postgres user's, which must own the directories
// PostgreSQL writes to.
func RunAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, errors.New("running as root and there is no postgres user to run PostgreSQL as")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Start initializes and starts a cluster. Run as root, it runs PostgreSQL as the postgres user.
func Start(o Options) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	// PostgreSQL refuses to run as root: run it as the postgres user, which must own the directory.
	cred, err := RunAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kassa-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if o.Fill != nil {
		if err := o.Fill(data, cred); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	} else {
		initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "kassa", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
		initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := initdb.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("initdb: %v: %s", err, out)
		}
	}
	args := []string{"-D", data, "-k", dir, "-c", "listen_addresses=", "-c", "max_connections=300", "-c", "shared_buffers=128MB"}
	if !o.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for _, s := range o.Settings {
		args = append(args, "-c", s)
	}
	c.cmd = exec.Command(filepath.Join(bin, "postgres"), args...)
	// Pdeathsig stops the cluster should its parent die without calling Stop.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err == nil {
		c.cmd.Stdout, c.cmd.Stderr = logf, logf
	}
	if err := c.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	c.URL = "postgres://kassa@/postgres?host=" + dir + "&sslmode=disable"
	c.logf = logf
	if err := c.waitReady(30 * time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
		c.Stop()
		return nil, fmt.Errorf("postgres did not start: %v: %s", err, log)
	}
	return c, nil
}

func (c *Cluster) waitReady(limit time.Duration) error {
	db, err := sql.Open("pgx", c.URL)
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Tool is the path of the PostgreSQL client program name (pg_dump, psql, …): on PATH, beside initdb,
// or in the newest of Debian's /usr/lib/postgresql/N/bin.
func Tool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	if bin, err := BinDir(); err == nil {
		dirs = append([]string{bin}, dirs...)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return filepath.Join(d, name), nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH or in /usr/lib/postgresql/*/bin", name)
}

// Dir is the cluster's directory: its Unix socket's, with the data directory DataDir inside.
func (c *Cluster) Dir() string { return c.dir }

// DataDir is the cluster's data directory.
func (c *Cluster) DataDir() string { return filepath.Join(c.dir, "data") }

// Socket is the path of the cluster's Unix socket, for a proxy in front of it (internal/pgproxy).
func (c *Cluster) Socket() string { return filepath.Join(c.dir, ".s.PGSQL.5432") }

// Restart stops the server with a fast shutdown, as "pg_ctl restart -m fast" does (SIGINT: roll back
// open transactions, disconnect every client, write a shutdown checkpoint), and starts it again on the
// same data directory with the same settings. It returns once the server accepts connections again.
// The reliability drill restarts PostgreSQL this way mid-run.
func (c *Cluster) Restart() error {
	old := c.cmd
	old.Process.Signal(syscall.SIGINT)
	old.Wait()
	c.cmd = exec.Command(old.Path, old.Args[1:]...)
	c.cmd.SysProcAttr = old.SysProcAttr
	if c.logf != nil {
		c.cmd.Stdout, c.cmd.Stderr = c.logf, c.logf
	}
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("restart postgres: %w", err)
	}
	return c.waitReady(60 * time.Second)
}

// Stop shuts the cluster down (fast shutdown) and removes its directory.
func (c *Cluster) Stop() {
	if c.cmd != nil && c.cmd.Process != nil {
		c.cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.cmd.Process.Kill()
			<-done
		}
	}
	os.RemoveAll(c.dir)
}
