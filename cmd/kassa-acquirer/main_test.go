package main

import (
	"bufio"
	"encoding/csv"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/acquirer/acquirertest"
	"github.com/kassapay/kassa/internal/card/cardtest"
)

// TestKassaAcquirer runs the binary and takes one sale through it.
func TestKassaAcquirer(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kassa-acquirer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build kassa-acquirer: %v\n%s", err, out)
	}
	dir, profile := t.TempDir(), filepath.Join(t.TempDir(), "cpu.pprof")
	cmd := exec.Command(bin, "--addr", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data-dir", dir, "--latency", "1ms",
		"--drop-rate", "0", "--cpu-profile", profile)
	var stderr cardtest.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	stuck := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	sc := bufio.NewScanner(out)
	var addr, base string
	for (addr == "" || base == "") && sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "kassa-acquirer is listening on "); ok {
			addr = strings.Fields(rest)[0]
		}
		if rest, ok := strings.CutPrefix(line, "HTTP on "); ok {
			base = strings.TrimSuffix(strings.Fields(rest)[0], ":")
		}
	}
	if !stuck.Stop() || addr == "" || base == "" {
		t.Fatalf("no listening lines within 30 s; stderr:\n%s", stderr.String())
	}
	done := make(chan error, 1)
	go func() {
		io.Copy(io.Discard, out)
		done <- cmd.Wait()
	}()

	term := acquirertest.Dial(t, addr)
	sale := term.Purchase("0200", cardtest.Visa, 1999)
	if a := term.Send(t, sale); a[39] != "00" || len(a[38]) != 6 {
		t.Fatalf("sale answered %v", a)
	}
	resp, err := http.Get(base + "/settlement/" + time.Now().UTC().Format(time.DateOnly) + ".csv")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(resp.Body).ReadAll()
	resp.Body.Close()
	if err != nil || len(rows) != 2 || rows[1][5] != sale[62] || rows[1][6] != "1999" {
		t.Errorf("settlement report %v (%v)", rows, err)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit 10 s after SIGTERM")
	}
	cardtest.Check(t, "the log", stderr.String())
	if fi, err := os.Stat(profile); err != nil || fi.Size() == 0 {
		t.Errorf("no CPU profile: %v", err)
	}

	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"--addr", "127.0.0.1:0"}, 2},
		{[]string{"--data-dir", dir, "extra"}, 2},
		{[]string{"--data-dir", dir, "--drop-rate", "1.5"}, 1},
		{[]string{"--data-dir", dir, "--addr", "nowhere"}, 1},
	} {
		err := exec.Command(bin, c.args...).Run()
		if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != c.code {
			t.Errorf("kassa-acquirer %v: %v, want exit %d", c.args, err, c.code)
		}
	}
}
