package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/pgcluster"
	"github.com/kassapay/kassa/internal/store"
)

// environment is where a backend's databases live: temporary SQLite directories, a durable
// throwaway PostgreSQL cluster ("postgres"; "postgres-archived" with its WAL archived by pgBackRest and
// commit timestamps tracked, for the point-in-time recovery drill), or a Patroni-managed primary and synchronous standby
// (the failover drill's, patroni.go: "patroni" with Patroni on etcd's v3 API, "patroni-etcd2" on its
// v2 API).
type environment struct {
	backend string
	dir     string
	cluster *pgcluster.Cluster
	ha      *haCluster
	// backrest archives the cluster's WAL, on "postgres-archived".
	backrest *pgBackRest
	// url connects to the PostgreSQL cluster's "postgres" database as its superuser; "" on SQLite.
	url string
}

func newEnvironment(backend string) (*environment, error) {
	dir, err := os.MkdirTemp("", "kassa-load-")
	if err != nil {
		return nil, err
	}
	e := &environment{backend: backend, dir: dir}
	switch backend {
	case "sqlite":
	case "postgres", "postgres-archived":
		// Durable commits (fsync and synchronous_commit on, the defaults), as in production.
		settings := append([]string{"max_wal_size=1GB"}, strings.Fields(os.Getenv("KASSA_LOAD_PG_SETTINGS"))...)
		if backend == "postgres-archived" {
			if e.backrest, err = newPgBackRest(); err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
			settings = append(settings, "archive_mode=on", "archive_command="+e.backrest.archiveCommand(), "track_commit_timestamp=on")
		}
		e.cluster, err = pgcluster.Start(pgcluster.Options{Durable: true, Settings: settings})
		if err == nil && e.backrest != nil {
			err = e.backrest.configure(context.Background(), e.cluster)
		}
		if err != nil {
			e.close()
			return nil, err
		}
		e.url = e.cluster.URL
	case "patroni", "patroni-etcd2":
		dcs := "etcd3"
		if backend == "patroni-etcd2" {
			dcs = "etcd"
		}
		if e.ha, err = startHACluster(dcs); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		e.url = e.ha.url
	default:
		os.RemoveAll(dir)
		return nil, fmt.Errorf("unknown backend %q (sqlite or postgres)", backend)
	}
	if e.url != "" {
		if err := os.WriteFile(filepath.Join(dir, "vault.key"), []byte(envelope.NewKEKText()), 0o600); err != nil {
			e.close()
			return nil, err
		}
		db, err := sql.Open("pgx", e.url)
		if err == nil {
			for _, name := range []string{"kassa_api", "kassa_ceiling", "kassa_latency", "kassa_ledger"} {
				if _, err = db.Exec("CREATE DATABASE " + name); err != nil {
					break
				}
			}
			db.Close()
		}
		if err != nil {
			e.close()
			return nil, err
		}
	}
	return e, nil
}

// dbArgs are kassa's flags for the database called name, and for PostgreSQL the key-encryption key.
func (e *environment) dbArgs(name string) []string {
	if e.url != "" {
		return []string{"--database-url", strings.Replace(e.url, "/postgres?", "/kassa_"+name+"?", 1),
			"--vault-key-file", filepath.Join(e.dir, "vault.key")}
	}
	return []string{"--data-dir", filepath.Join(e.dir, name)}
}

// openStore opens the database called name in this process, with the store's production settings
// (SQLite synchronous=FULL; PostgreSQL on the durable cluster), and migrates it.
func (e *environment) openStore(ctx context.Context, name string) (*store.DB, error) {
	cfg := store.Config{}
	if args := e.dbArgs(name); args[0] == "--database-url" { // args[2:] is the vault key, not needed here
		cfg.DatabaseURL = args[1]
	} else {
		cfg.DataDir = args[1]
	}
	db, err := store.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// analyze updates PostgreSQL's planner statistics of the database called name, between scenarios: the
// next one starts from tables as autovacuum keeps them in a running database. Otherwise a table that
// the previous scenario grew from nothing in seconds would be planned as if it were still empty.
func (e *environment) analyze(ctx context.Context, name string) error {
	if e.url == "" {
		return nil
	}
	db, err := sql.Open("pgx", e.dbArgs(name)[1])
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "ANALYZE")
	return err
}

// settle leaves database name as a database that has been running for a while is, without the
// work its last run left owed, so that the next run does not pay for it: on PostgreSQL vacuumed and
// analyzed (autovacuum would otherwise start on the churned tables during the next run) and
// checkpointed; on SQLite its write-ahead log checkpointed and truncated (the next run's commits
// would otherwise copy it back). db is a connection to it of this process.
func (e *environment) settle(ctx context.Context, db *store.DB) error {
	stmts := []string{"PRAGMA wal_checkpoint(TRUNCATE)"}
	if e.url != "" {
		stmts = []string{"VACUUM (ANALYZE)", "CHECKPOINT"}
	}
	for _, stmt := range stmts {
		if _, err := db.Raw().ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

func (e *environment) close() {
	if e.cluster != nil {
		e.cluster.Stop()
	}
	if e.ha != nil {
		e.ha.stop()
	}
	if e.backrest != nil {
		e.backrest.close()
	}
	os.RemoveAll(e.dir)
}

// kassa is a running "kassa serve".
type kassa struct {
	bin    string
	dbArgs []string
	cmd    *exec.Cmd
	url    string
	done   chan error
}

func startKassa(ctx context.Context, bin string, dbArgs, extra []string) (*kassa, error) {
	k := &kassa{bin: bin, dbArgs: dbArgs}
	args := append(append([]string{"serve", "--addr", "127.0.0.1:0"}, dbArgs...), extra...)
	if err := k.start(ctx, exec.Command(bin, args...), "Kassa is listening on ", "kassa serve"); err != nil {
		return nil, err
	}
	return k, nil
}

// start runs cmd, its standard error to a log file, and waits for the line of its standard output
// that begins with prefix and goes on with the URL it serves (what names the program in errors).
func (k *kassa) start(ctx context.Context, cmd *exec.Cmd, prefix, what string) error {
	k.cmd, k.done = cmd, make(chan error, 1)
	out, err := k.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	logs, err := os.CreateTemp("", "kassa-load-serve-*.log")
	if err != nil {
		return err
	}
	k.cmd.Stderr = logs
	if err := k.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w (build it with: make build)", k.cmd.Path, err)
	}
	go func() { k.done <- k.cmd.Wait(); logs.Close() }()
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				listening <- strings.Fields(rest)[0]
			}
		}
	}()
	select {
	case k.url = <-listening:
		return nil
	case err := <-k.done:
		return fmt.Errorf("%s exited: %v (log: %s)", what, err, logs.Name())
	case <-time.After(60 * time.Second):
		k.stop()
		return fmt.Errorf("%s did not listen within 60 s", what)
	case <-ctx.Done():
		k.stop()
		return ctx.Err()
	}
}

func (k *kassa) stop() {
	if k.cmd.ProcessState != nil || k.cmd.Process == nil {
		return
	}
	k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(30 * time.Second):
		k.cmd.Process.Kill()
		<-k.done
	}
}

// cpuSeconds is a process's user and system CPU time so far.
func cpuSeconds(p *os.Process) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may contain spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

// merchant is the merchant the scenarios act for.
type merchant struct {
	ID, ClientID, ClientSecret string
	AccountID                  string // the account of the v1 payments API and its API keys
}

// newMerchant creates a merchant called name (its e-mail is name@example.com).
func (k *kassa) newMerchant(ctx context.Context, name string) (merchant, error) {
	args := append([]string{"merchant", "create", "--init", "--name", name, "--email", name + "@example.com"}, k.dbArgs...)
	out, err := exec.CommandContext(ctx, k.bin, args...).Output()
	if err != nil {
		return merchant{}, fmt.Errorf("kassa merchant create: %w", err)
	}
	var m struct {
		MerchantID   string `json:"merchant_id"`
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		AccountID    string `json:"account_id"`
	}
	if err := json.Unmarshal(out, &m); err != nil {
		return merchant{}, err
	}
	// Every velocity limit stays on. The scenarios drive one token as hard as they can, thousands of
	// requests a second, which its default request rate would refuse, and the drill's clients create
	// more hosted-page sessions with one API key than the default 300 a minute (its soak stalled on
	// them, every client waiting out the 429): the merchant's limits are raised above what they drive,
	// so that the runs measure the limits' cost, not their refusals.
	args = append([]string{"merchant", "update", "--merchant-id", m.MerchantID,
		"--velocity-request-rate", "1000000", "--velocity-sessions", "1000000"}, k.dbArgs...)
	if out, err := exec.CommandContext(ctx, k.bin, args...).CombinedOutput(); err != nil {
		return merchant{}, fmt.Errorf("kassa merchant update: %w: %s", err, out)
	}
	return merchant{ID: m.MerchantID, ClientID: m.ClientID, ClientSecret: m.ClientSecret, AccountID: m.AccountID}, nil
}
