package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// A watch of a process's memory sees a peak that came and went while it watched, from where the
// process stood before.
func TestRSSWatchSeesAPeak(t *testing.T) {
	w := watchRSS(os.Getpid())
	held := make([]byte, 64<<20)
	for i := range held {
		held[i] = 1
	}
	time.Sleep(2 * rssSampleEvery)
	held[len(held)-1] = 2 // held until here
	peak := w.stop()
	if w.before == 0 || peak < w.before+48<<20 {
		t.Errorf("64 MiB touched: peak %d MiB, before %d MiB", peak>>20, w.before>>20)
	}
}

// The open-file checks fail plainly on a limit too low for the clients, and pass otherwise.
func TestOpenFileLimits(t *testing.T) {
	if err := ensureOpenFiles(filesFor(64)); err != nil {
		t.Errorf("64 clients: %v", err)
	}
	if err := ensureOpenFiles(1 << 40); err == nil {
		t.Error("no error for 2^40 open files")
	}
	if err := checkOpenFiles(os.Getpid(), "this test", filesFor(64)); err != nil {
		t.Errorf("64 clients: %v", err)
	}
	if err := checkOpenFiles(os.Getpid(), "this test", 1<<40); err == nil || !strings.Contains(err.Error(), "this test may open") {
		t.Errorf("2^40 open files: %v", err)
	}
}
