package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kassapay/kassa/internal/pgcluster"
)

// The failover drill's Patroni timings, much shorter than production's (deploy/ha/patroni.yml: ttl 30,
// loop_wait 10, retry_timeout 10) so that a failover fits in a short run: the leader key expires haTTL
// seconds after the primary last renewed it, and the standby takes it on its next loop, so that a lost
// primary is replaced within haTTL + haLoopWait seconds. Patroni wants loop_wait + 2 × retry_timeout
// at most ttl.
const (
	haTTL          = 10
	haLoopWait     = 2
	haRetryTimeout = 4
)

// haCluster is the failover drill's PostgreSQL: one etcd and two Patroni members, each running its
// own PostgreSQL, on loopback ports, under a temporary directory, in synchronous mode (a commit is
// acknowledged once the standby has it). Run as root, Patroni and PostgreSQL run as the postgres
// user, as pgcluster runs PostgreSQL.
type haCluster struct {
	dir      string
	cred     *syscall.Credential
	etcd     *exec.Cmd
	etcdArgs []string // its flags, to restart it on the same data and ports
	etcdAddr string   // where it listens for clients
	members  []*member
	// url connects to the "postgres" database through both members, to whichever takes writes
	// (target_session_attrs=read-write), as a Kassa node's --database-url does.
	url string
}

// member is one Patroni member and its PostgreSQL, which the drill fails as a machine fails.
type member struct {
	name            string
	dir             string // its configuration, data directory, socket and log
	host            string // its loopback address, its own as a machine's is
	pgPort, apiPort int
	cred            *syscall.Credential
	mu              sync.Mutex
	cmd             *exec.Cmd // Patroni; nil while the member is down
	done            chan struct{}
}

// haAvailable reports why the drill's cluster cannot be started here, or nil.
func haAvailable() error {
	if err := pgcluster.Available(); err != nil {
		return err
	}
	for _, p := range []string{"patroni", "etcd"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("%s is not installed (Debian: apt-get install patroni etcd-server etcd-client)", p)
		}
	}
	return nil
}

// freePorts are n TCP ports of 127.0.0.1 free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startHACluster starts etcd and both members and returns once one is primary and the other its
// synchronous standby. dcs is the section of Patroni's configuration that names etcd, and so the API
// Patroni uses: "etcd" (deploy/ha's), etcd's v2 API, which etcd 3.4 serves when told to, or "etcd3".
func startHACluster(dcs string) (_ *haCluster, err error) {
	if dcs != "etcd3" && dcs != "etcd" {
		return nil, fmt.Errorf("unknown DCS %q (etcd3 or etcd)", dcs)
	}
	if err := haAvailable(); err != nil {
		return nil, err
	}
	bin, err := pgcluster.BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := pgcluster.RunAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kassa-ha-")
	if err != nil {
		return nil, err
	}
	c := &haCluster{dir: dir, cred: cred}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	client, peer := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	c.etcdAddr = strings.TrimPrefix(client, "http://")
	c.etcdArgs = []string{"--name", "drill", "--data-dir", filepath.Join(dir, "etcd"), "--listen-client-urls", client,
		"--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "drill=" + peer, "--enable-v2=" + strconv.FormatBool(dcs == "etcd")}
	if err := c.startEtcd(); err != nil {
		return nil, err
	}
	var hosts []string
	for i := range 2 {
		// Each member on an address of its own: the driver bounds the connection to each host of a
		// multi-host URL by connect_timeout, but counts one host's addresses as one, whatever their
		// ports, so that members on one address would share a single connect_timeout.
		m := &member{name: fmt.Sprintf("pg%d", i+1), dir: filepath.Join(dir, fmt.Sprintf("pg%d", i+1)),
			host: fmt.Sprintf("127.0.0.%d", i+2), pgPort: ports[2+2*i], apiPort: ports[3+2*i], cred: cred}
		if err := os.Mkdir(m.dir, 0o700); err != nil {
			return nil, err
		}
		if cred != nil {
			if err := os.Chown(m.dir, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
		if err := os.WriteFile(filepath.Join(m.dir, "patroni.yml"), []byte(m.config(bin, dcs, client)), 0o644); err != nil {
			return nil, err
		}
		c.members = append(c.members, m)
		hosts = append(hosts, fmt.Sprintf("%s:%d", m.host, m.pgPort))
		// The first member bootstraps the cluster; the second, started after, clones it.
		if err := m.start(); err != nil {
			return nil, err
		}
		if i == 0 {
			if _, err := c.waitPrimary(90*time.Second, nil); err != nil {
				return nil, err
			}
		}
	}
	if err := c.waitSync(90 * time.Second); err != nil {
		return nil, err
	}
	c.url = "postgres://kassa:drill@" + strings.Join(hosts, ",") + "/postgres?target_session_attrs=read-write&sslmode=disable&connect_timeout=2"
	return c, nil
}

// config is the member's Patroni configuration: deploy/ha/patroni.yml's settings, with the drill's
// timings, loopback addresses, trust authentication and no archiving.
func (m *member) config(bin, dcs, etcd string) string {
	return fmt.Sprintf(`scope: kassa-drill
namespace: /kassa-drill/
name: %[1]s
log:
  level: INFO
restapi:
  listen: %[10]s:%[2]d
  connect_address: %[10]s:%[2]d
%[11]s:
  hosts: %[3]s
bootstrap:
  dcs:
    ttl: %[4]d
    loop_wait: %[5]d
    retry_timeout: %[6]d
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: false
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        fsync: "on"
        synchronous_commit: "on"
        full_page_writes: "on"
        wal_level: replica
        wal_log_hints: "on"
        hot_standby: "on"
        max_connections: 300
        shared_buffers: 128MB
        max_wal_size: 1GB
        max_wal_senders: 10
        max_replication_slots: 10
  initdb:
    - encoding: UTF8
    - data-checksums
postgresql:
  listen: %[10]s:%[7]d
  connect_address: %[10]s:%[7]d
  data_dir: %[8]s/data
  bin_dir: %[9]s
  pgpass: %[8]s/pgpass
  authentication:
    superuser:
      username: kassa
      password: drill
    replication:
      username: replicator
      password: drill
  parameters:
    unix_socket_directories: %[8]s
  pg_hba:
    - local all all trust
    - host all all 127.0.0.0/8 trust
    - host replication all 127.0.0.0/8 trust
`, m.name, m.apiPort, strings.TrimPrefix(etcd, "http://"), haTTL, haLoopWait, haRetryTimeout, m.pgPort, m.dir, bin, m.host, dcs)
}

// startEtcd starts etcd, on the data and ports of its first start.
func (c *haCluster) startEtcd() error {
	cmd := exec.Command("etcd", c.etcdArgs...)
	logs, err := os.OpenFile(filepath.Join(c.dir, "etcd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logs.Close()
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	c.etcd = cmd
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if conn, err := net.Dial("tcp", c.etcdAddr); err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd did not listen within 30 s (log: %s)", logs.Name())
		}
	}
}

// killEtcd kills etcd with SIGKILL.
func (c *haCluster) killEtcd() {
	c.etcd.Process.Kill()
	c.etcd.Wait()
}

// start starts the member's Patroni, which starts its PostgreSQL (bootstrapping, cloning, or
// rewinding it as the cluster needs).
func (m *member) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cmd := exec.Command("patroni", filepath.Join(m.dir, "patroni.yml"))
	logs, err := os.OpenFile(filepath.Join(m.dir, "patroni.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logs.Close()
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Dir = m.dir
	cmd.Env = append(os.Environ(), "HOME="+m.dir)
	// Pdeathsig stops Patroni should the drill die without stopping the cluster.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: m.cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start patroni %s: %w", m.name, err)
	}
	m.cmd, m.done = cmd, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(m.done)
	return nil
}

// pids are the member's processes: its Patroni, its PostgreSQL's postmaster (from the data directory's
// postmaster.pid, when it runs), and their descendants. No process group holds them all: Patroni
// starts PostgreSQL in a session of its own, and each PostgreSQL process makes itself a session
// leader.
func (m *member) pids() []int {
	var roots []int
	m.mu.Lock()
	if m.cmd != nil {
		roots = append(roots, m.cmd.Process.Pid)
	}
	m.mu.Unlock()
	if b, err := os.ReadFile(filepath.Join(m.dir, "data", "postmaster.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])); err == nil && pid > 1 {
			roots = append(roots, pid)
		}
	}
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses and may contain spaces: the
		// state, then the parent's pid.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 1 {
			ppid, _ := strconv.Atoi(f[1])
			children[ppid] = append(children[ppid], pid)
		}
	}
	seen := map[int]bool{}
	for len(roots) > 0 {
		pid := roots[0]
		roots = roots[1:]
		if !seen[pid] {
			seen[pid] = true
			roots = append(roots, children[pid]...)
		}
	}
	pids := make([]int, 0, len(seen))
	for pid := range seen {
		pids = append(pids, pid)
	}
	return pids
}

// signal sends sig to every process of the member. To reach a process forked meanwhile too, it
// stops them all first (SIGSTOP), looks again, and sends sig to every one found.
func (m *member) signal(sig syscall.Signal) {
	if sig != syscall.SIGCONT {
		for _, pid := range m.pids() {
			syscall.Kill(pid, syscall.SIGSTOP)
		}
	}
	for _, pid := range m.pids() {
		syscall.Kill(pid, sig)
	}
}

// kill fails the member as a machine that loses power: every one of its processes killed with
// SIGKILL at once. It returns once Patroni has exited.
func (m *member) kill() {
	m.signal(syscall.SIGKILL)
	m.mu.Lock()
	done := m.done
	m.cmd = nil
	m.mu.Unlock()
	if done != nil {
		<-done
	}
}

// get is the status of GET path of the member's REST API, or 0 when it does not answer within a
// second.
func (m *member) get(path string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s:%d%s", m.host, m.apiPort, path), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// reinitialize asks the member's Patroni to copy its data directory anew from the primary, as
// "patronictl reinit" does.
func (m *member) reinitialize() error {
	resp, err := http.Post(fmt.Sprintf("http://%s:%d/reinitialize", m.host, m.apiPort), "application/json", strings.NewReader(`{"force": true}`))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /reinitialize: %s", resp.Status)
	}
	return nil
}

// waitPrimary waits for a member other than not to answer GET /primary with 200 (Patroni's leader,
// running PostgreSQL as primary), for at most limit, and returns it.
func (c *haCluster) waitPrimary(limit time.Duration, not *member) (*member, error) {
	for deadline := time.Now().Add(limit); ; time.Sleep(100 * time.Millisecond) {
		for _, m := range c.members {
			if m != not && m.get("/primary") == http.StatusOK {
				return m, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no primary after %v%s", limit, c.logTails())
		}
	}
}

// waitSync waits for a member to answer GET /sync with 200 (the synchronous standby, streaming), for
// at most limit.
func (c *haCluster) waitSync(limit time.Duration) error {
	for deadline := time.Now().Add(limit); ; time.Sleep(200 * time.Millisecond) {
		for _, m := range c.members {
			if m.get("/sync") == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no synchronous standby after %v%s", limit, c.logTails())
		}
	}
}

// logTails are the last lines of each member's log, which say why a member did not come up (its
// directory is removed with the cluster).
func (c *haCluster) logTails() string {
	var b strings.Builder
	for _, m := range c.members {
		log, _ := os.ReadFile(filepath.Join(m.dir, "patroni.log"))
		lines := strings.Split(strings.TrimSpace(string(log)), "\n")
		fmt.Fprintf(&b, "\n%s's log:\n  %s", m.name, strings.Join(lines[max(0, len(lines)-30):], "\n  "))
	}
	return b.String()
}

// other is the member that is not m.
func (c *haCluster) other(m *member) *member {
	if c.members[0] == m {
		return c.members[1]
	}
	return c.members[0]
}

// stop kills every process of the cluster and removes its directory, unless KASSA_LOAD_KEEP_HA=1
// keeps it for its logs.
func (c *haCluster) stop() {
	for _, m := range c.members {
		m.kill()
	}
	if c.etcd != nil && c.etcd.ProcessState == nil {
		c.killEtcd()
	}
	if os.Getenv("KASSA_LOAD_KEEP_HA") == "1" {
		fmt.Fprintf(os.Stderr, "kassa-load: the cluster's logs are kept in %s\n", c.dir)
		return
	}
	if err := os.RemoveAll(c.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "kassa-load: remove %s: %v\n", c.dir, err)
	}
}
