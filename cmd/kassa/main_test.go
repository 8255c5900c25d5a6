package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kassapay/kassa/api/apitest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// These tests run the real kassa binary, and the end-to-end tests of the ISO 8583 connector the real
// kassa-acquirer beside it, both built once per test run.
var kassaBin, acquirerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kassa-bin-")
	if err != nil {
		panic(err)
	}
	kassaBin, acquirerBin = filepath.Join(dir, "kassa"), filepath.Join(dir, "kassa-acquirer")
	if out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", dir+string(filepath.Separator), ".", "../kassa-acquirer").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build kassa and kassa-acquirer: %v\n%s", err, out)
		os.Exit(1)
	}
	code := storetest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is a running "kassa serve".
type server struct {
	cmd    *exec.Cmd
	url    string
	stdout *cardtest.Buffer
	stderr *cardtest.Buffer
	done   chan error
}

// dbArgs selects a backend for a test: a fresh SQLite data dir or a fresh PostgreSQL database.
func dbArgs(t *testing.T, backend string) []string {
	if backend == "postgres" {
		key := filepath.Join(t.TempDir(), "vault.key")
		if err := os.WriteFile(key, []byte(envelope.NewKEKText()), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{"--database-url", storetest.PostgresURL(t), "--vault-key-file", key}
	}
	return []string{"--data-dir", t.TempDir()}
}

// startServer runs kassa serve on a free port and waits until it listens.
func startServer(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	return startCommand(t, exec.Command(kassaBin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...), env)
}

// startCommand runs cmd, a kassa serve on a free port, with the extra environment variables env, and
// waits until it listens.
func startCommand(t *testing.T, cmd *exec.Cmd, env []string) *server {
	t.Helper()
	s := &server{cmd: cmd, stdout: &cardtest.Buffer{}, stderr: &cardtest.Buffer{}, done: make(chan error, 1)}
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stderr = s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.stdout.Write([]byte(sc.Text() + "\n"))
			if rest, ok := strings.CutPrefix(sc.Text(), "Kassa is listening on "); ok {
				lines <- strings.Fields(rest)[0]
			}
		}
		close(lines)
	}()
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		s.stop(t)
		cardtest.Check(t, "the server's log", s.stderr.String())
		cardtest.Check(t, "the server's output", s.stdout.String())
	})
	select {
	case u, ok := <-lines:
		if !ok {
			t.Fatalf("kassa serve exited before listening:\n%s", s.stderr)
		}
		s.url = u
	case <-time.After(30 * time.Second):
		t.Fatalf("kassa serve did not listen within 30 s:\n%s", s.stderr)
	}
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop(t *testing.T) error {
	if s.cmd.ProcessState != nil {
		return nil
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		return err
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		t.Errorf("kassa serve did not stop within 30 s of SIGTERM")
		return <-s.done
	}
}

// cli runs an operator command and returns its stdout, stderr and exit status.
func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return cliEnv(t, nil, args...)
}

// cliEnv is cli with extra environment variables ("NAME=value"; empty strings are ignored).
func cliEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	return cliIn(t, "", env, args...)
}

// cliIn is cliEnv run in the working directory dir ("": the test's).
func cliIn(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(kassaBin, args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for _, e := range env {
		if e != "" {
			cmd.Env = append(cmd.Env, e)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// cliJSON runs an operator command that must succeed and decodes its one JSON object.
func cliJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	stdout, stderr, code := cli(t, args...)
	if code != 0 {
		t.Fatalf("kassa %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	return decodeOne(t, stdout)
}

// decodeOne decodes the one JSON object a command printed.
func decodeOne(t *testing.T, stdout string) map[string]any {
	t.Helper()
	var out map[string]any
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("printed %q, not one JSON object: %v", stdout, err)
	}
	if dec.More() {
		t.Fatalf("printed more than one JSON object: %q", stdout)
	}
	return out
}

// getJSON sends a request and decodes the JSON answer. The answer must match api/openapi.yaml.
func getJSON(t *testing.T, method, url string, body io.Reader, hdr map[string]string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, body)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	apitest.Check(t, req, resp.StatusCode, resp.Header, raw)
	var out map[string]any
	json.Unmarshal(raw, &out)
	return resp, out
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }
