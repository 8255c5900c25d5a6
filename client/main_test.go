package client_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The examples and most tests run against a real `kassa serve`, built from this repository by TestMain
// and started on a SQLite data directory of its own, with one merchant whose credentials are in the
// environment as the examples read them.
var (
	kassaBin string // the kassa binary
	dataDir  string // the server's --data-dir, for operator commands
)

// testCards are the card numbers the tests send: none may appear in the server's log.
var testCards = []string{"4242424242424242", "5555555555554444"}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kassa-client-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kassaBin, dataDir = filepath.Join(dir, "kassa"), filepath.Join(dir, "data")
	build := exec.Command("go", "build", "-o", kassaBin, "./cmd/kassa")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build kassa: %v\n%s", err, out)
		return 1
	}
	srv, err := startServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code, err := func() (int, error) {
		defer srv.stop()
		merchant, err := newMerchant("Example Shop", "shop@example.com")
		if err != nil {
			return 1, err
		}
		key, err := operator("apikey", "create", "--account-id", merchant["account_id"],
			"--permissions", "payment_intents:read,payment_intents:write,payment_methods:read,payment_methods:write,refunds:read,refunds:write")
		if err != nil {
			return 1, err
		}
		for name, v := range map[string]string{"KASSA_URL": srv.url, "KASSA_CLIENT_ID": merchant["client_id"],
			"KASSA_CLIENT_SECRET": merchant["client_secret"], "KASSA_API_KEY": key["key"], "KASSA_ACCOUNT": merchant["account_id"]} {
			os.Setenv(name, v)
		}
		return m.Run(), nil
	}()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%v\nthe server's log:\n%s", err, srv.log.String())
		return 1
	}
	// Card data never reaches a log beyond its first 6 and last 4 digits.
	for _, pan := range testCards {
		if strings.Contains(srv.log.String(), pan) {
			fmt.Fprintf(os.Stderr, "the server's log holds the card number %s\n", pan)
			return 1
		}
	}
	return code
}

// server is the running `kassa serve`.
type server struct {
	cmd  *exec.Cmd
	url  string
	log  *syncBuffer
	done chan error
}

func startServer() (*server, error) {
	s := &server{log: &syncBuffer{}, done: make(chan error, 1)}
	s.cmd = exec.Command(kassaBin, "serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	s.cmd.Stderr = s.log
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "Kassa is listening on "); ok {
				listening <- strings.Fields(rest)[0]
			}
		}
		close(listening)
	}()
	go func() { s.done <- s.cmd.Wait() }()
	select {
	case u, ok := <-listening:
		if !ok {
			<-s.done
			return nil, fmt.Errorf("kassa serve exited before listening:\n%s", s.log)
		}
		s.url = u
		return s, nil
	case <-time.After(60 * time.Second):
		s.stop()
		return nil, fmt.Errorf("kassa serve did not listen within 60 s:\n%s", s.log)
	}
}

// stop ends the server with SIGTERM, or SIGKILL when it has not stopped 30 seconds later.
func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// newMerchant creates a merchant with `kassa merchant create`.
func newMerchant(name, email string) (map[string]string, error) {
	return operator("merchant", "create", "--name", name, "--email", email)
}

// operator runs an operator command on the server's data directory and returns the string fields of
// the JSON object it prints.
func operator(args ...string) (map[string]string, error) {
	cmd := exec.Command(kassaBin, append(args, "--data-dir", dataDir)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kassa %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var fields map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &fields); err != nil {
		return nil, fmt.Errorf("kassa %s printed %q: %v", strings.Join(args, " "), stdout.String(), err)
	}
	out := map[string]string{}
	for k, v := range fields {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out, nil
}

// syncBuffer is a bytes.Buffer that the server's output and the tests may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
