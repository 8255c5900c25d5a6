package deploy_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/store/storetest"
)

// tool is the path of a program the check of deploy/ha needs, or the test skips (fails under
// KASSA_REQUIRE_ALL=1) naming the Debian package that has it.
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		storetest.Unavailable(t, "%s is not installed (Debian: apt-get install %s)", name, pkg)
	}
	return p
}

// machines matches the names of the three database machines in deploy/ha's files.
var machines = regexp.MustCompile(`\bdb[123]\b`)

// requireLines fails t for each pattern that matches no line of file (a path from the root).
func requireLines(t *testing.T, file string, patterns ...string) {
	t.Helper()
	text := read(t, file)
	for _, p := range patterns {
		if !regexp.MustCompile(`(?m)^\s*` + p + `\s*$`).MatchString(text) {
			t.Errorf("%s has no line matching %q", file, p)
		}
	}
}

// The Patroni configuration passes "patroni --validate-config" (which also checks that etcd's port
// answers), Patroni's own client ("patronictl list") reads the cluster from an etcd run with
// deploy/ha/etcd.env's settings through the API patroni.yml names (etcd's v2 API answers only when
// etcd.env enables it), and the file keeps the settings that make a failover lose no acknowledged
// commit: synchronous mode, durable commits, pg_rewind with hint bits logged, and WAL archived by
// pgBackRest. For the check the machines' names become 127.0.0.2 (Patroni refuses 127.0.0.1 as an
// address other members connect to) and etcd is a throwaway one on that address, with etcd.env's
// settings that name no machine.
func TestPatroniConfig(t *testing.T) {
	t.Parallel()
	patroni := tool(t, "patroni", "patroni")
	patronictl := tool(t, "patronictl", "patroni")
	etcd := tool(t, "etcd", "etcd-server")
	const file = "deploy/ha/patroni.yml"
	requireLines(t, file, `synchronous_mode: true`, `synchronous_mode_strict: (true|false)`, `use_pg_rewind: true`,
		`fsync: "on"`, `synchronous_commit: "on"`, `full_page_writes: "on"`, `wal_level: replica`, `wal_log_hints: "on"`,
		`- data-checksums`, `archive_mode: "on"`, `archive_command: pgbackrest --stanza=kassa archive-push %p`,
		`restore_command: pgbackrest --stanza=kassa archive-get %f "%p"`, `listen: 0.0.0.0:8008`)

	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	client := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	args := []string{"--data-dir", filepath.Join(dir, "etcd"), "--listen-client-urls", "http://" + client,
		"--advertise-client-urls", "http://" + client, "--listen-peer-urls", "http://127.0.0.2:0"}
	cmd := exec.Command(etcd, args...)
	// etcd.env's other settings (the v2 API, timings, the cluster's token) are given as etcd's own
	// environment variables; etcd refuses a variable that a flag also sets.
	cmd.Env = os.Environ()
	for _, v := range etcdEnv(t) {
		if !machines.MatchString(v.value) && !slices.Contains(args, v.flag()) {
			cmd.Env = append(cmd.Env, v.name+"="+v.value)
		}
	}
	logs, _ := os.Create(filepath.Join(dir, "etcd.log"))
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitListening(t, client, filepath.Join(dir, "etcd.log"))

	config := read(t, file)
	config = regexp.MustCompile(`(?m)^(\s*hosts:).*$`).ReplaceAllString(config, "$1 "+client)
	config = machines.ReplaceAllString(config, "127.0.0.2")
	path := filepath.Join(dir, "patroni.yml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(patroni, "--validate-config", path).CombinedOutput()
	// A valid file is one it says nothing about.
	if err != nil || len(out) > 0 {
		t.Fatalf("patroni --validate-config: %v\n%s", err, out)
	}
	// patronictl retries an etcd that does not serve the API it asks for without end: bounded.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err = exec.CommandContext(ctx, patronictl, "-c", path, "list").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Cluster: kassa") {
		b, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
		t.Fatalf("patronictl list against etcd with etcd.env's settings: %v\n%s\netcd's log:\n%s", err, out, b)
	}
}

// waitListening waits for a TCP server at addr, for at most 20 s; log is its log, shown if it never
// comes up.
func waitListening(t *testing.T, addr, log string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log)
			t.Fatalf("nothing listens at %s after 20 s:\n%s", addr, b)
		}
	}
}

// haproxy's configuration passes "haproxy -c" without an alert and sends connections only to the
// member whose Patroni answers GET /primary on port 8008, closing those to a member once it is not.
func TestHAProxyConfig(t *testing.T) {
	t.Parallel()
	haproxy := tool(t, "haproxy", "haproxy")
	const file = "deploy/ha/haproxy.cfg"
	requireLines(t, file, `option httpchk`, `http-check send meth GET uri /primary`, `http-check expect status 200`,
		`default-server .*on-marked-down shutdown-sessions.*`)
	servers := regexp.MustCompile(`(?m)^\s*server db[123] db[123]:5432 .*check port 8008$`).FindAllString(read(t, file), -1)
	if len(servers) != 3 {
		t.Errorf("%s: %d servers checked on Patroni's port 8008, want the three members: %q", file, len(servers), servers)
	}
	out, err := exec.Command(haproxy, "-c", "-f", filepath.Join("..", file)).CombinedOutput()
	if err != nil || strings.Contains(string(out), "[ALERT]") || !strings.Contains(string(out), "Configuration file is valid") {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
}

// pgBackRest reads its configuration without a warning (an unknown option is only a warning to it)
// or an error, for the commands the deployment runs, and its stanza is the one Patroni's
// archive_command pushes to.
func TestPgBackRestConfig(t *testing.T) {
	t.Parallel()
	pgbackrest := tool(t, "pgbackrest", "pgbackrest")
	const file = "deploy/ha/pgbackrest.conf"
	requireLines(t, file, `\[kassa\]`, `pg1-path=/var/lib/postgresql/15/kassa`, `repo1-retention-full=\d+`)
	abs, err := filepath.Abs(filepath.Join("..", file))
	if err != nil {
		t.Fatal(err)
	}
	// "help" parses the configuration file as the command would, without connecting anywhere.
	for _, command := range []string{"backup", "archive-push", "archive-get", "restore"} {
		out, err := exec.Command(pgbackrest, "--config="+abs, "--stanza=kassa", "help", command).CombinedOutput()
		if err != nil || regexp.MustCompile(`(?m)^(WARN|ERROR):`).Match(out) {
			t.Errorf("pgbackrest help %s with %s: %v\n%s", command, file, err, out)
		}
	}
}

// The systemd units — the backup timers, their service, and the drop-in for Debian's
// patroni@.service — pass systemd-analyze verify without a word about them.
func TestHAUnits(t *testing.T) {
	t.Parallel()
	analyze := tool(t, "systemd-analyze", "systemd")
	tool(t, "pgbackrest", "pgbackrest")
	tool(t, "curl", "curl")
	const debianPatroni = "/lib/systemd/system/patroni@.service"
	if _, err := os.Stat(debianPatroni); err != nil {
		storetest.Unavailable(t, "%s is missing (Debian: apt-get install patroni)", debianPatroni)
	}
	dir := t.TempDir()
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err == nil {
			err = os.MkdirAll(filepath.Dir(to), 0o755)
		}
		if err == nil {
			err = os.WriteFile(to, b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"pgbackrest-backup@.service", "pgbackrest-full.timer", "pgbackrest-incr.timer", "patroni@15-kassa.service.d/kassa.conf"} {
		copyFile(filepath.Join("..", "deploy", "ha", f), filepath.Join(dir, f))
	}
	copyFile(debianPatroni, filepath.Join(dir, "patroni@.service"))
	cmd := exec.Command(analyze, "verify", "pgbackrest-full.timer", "pgbackrest-incr.timer", "pgbackrest-backup@full.service",
		"pgbackrest-backup@incr.service", "patroni@15-kassa.service")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SYSTEMD_UNIT_PATH="+dir+":")
	out, err := cmd.CombinedOutput()
	// systemd-analyze verify exits 0 on unknown keys and bad values, which it only mentions.
	if err != nil || regexp.MustCompile(`pgbackrest|patroni|kassa\.conf`).Match(out) {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, timer := range []string{"full", "incr"} {
		requireLines(t, "deploy/ha/pgbackrest-"+timer+".timer", `Unit=pgbackrest-backup@`+timer+`\.service`, `OnCalendar=.+`)
	}
	requireLines(t, "deploy/ha/pgbackrest-backup@.service", `ExecCondition=.*http://127\.0\.0\.1:8008/primary`,
		`ExecStart=/usr/bin/pgbackrest --stanza=kassa --type=%i backup`)
}

// The etcd settings are each a flag etcd 3.4 has (etcd only logs an unknown ETCD_ variable), and
// they describe one member of three: its name and peer address are its entry in the initial cluster.
func TestEtcdEnv(t *testing.T) {
	t.Parallel()
	etcd := tool(t, "etcd", "etcd-server")
	help, _ := exec.Command(etcd, "--help").CombinedOutput()
	vars := map[string]string{}
	for _, v := range etcdEnv(t) {
		if !strings.HasPrefix(v.name, "ETCD_") || !regexp.MustCompile(`(?m)^\s+`+regexp.QuoteMeta(v.flag())+`\b`).Match(help) {
			t.Errorf("etcd.env: %s=%s is not an etcd setting (no %s in etcd --help)", v.name, v.value, v.flag())
		}
		vars[v.name] = v.value
	}
	members := strings.Split(vars["ETCD_INITIAL_CLUSTER"], ",")
	self := fmt.Sprintf("%s=%s", vars["ETCD_NAME"], vars["ETCD_INITIAL_ADVERTISE_PEER_URLS"])
	if len(members) != 3 || !strings.Contains(","+vars["ETCD_INITIAL_CLUSTER"]+",", ","+self+",") {
		t.Errorf("etcd.env: ETCD_INITIAL_CLUSTER=%s: want three members, %s among them", vars["ETCD_INITIAL_CLUSTER"], self)
	}
}

// setting is one NAME=value line of deploy/ha/etcd.env.
type setting struct{ name, value string }

// flag is the etcd flag an ETCD_ variable stands for: ETCD_DATA_DIR for --data-dir.
func (s setting) flag() string {
	return "--" + strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s.name, "ETCD_")), "_", "-")
}

// etcdEnv is deploy/ha/etcd.env's settings, in order; a line that is neither a comment nor NAME=value
// fails t.
func etcdEnv(t *testing.T) []setting {
	t.Helper()
	var settings []setting
	sc := bufio.NewScanner(strings.NewReader(read(t, "deploy/ha/etcd.env")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || name == "" {
			t.Fatalf("etcd.env: %q is not NAME=value", line)
		}
		settings = append(settings, setting{name, value})
	}
	return settings
}
