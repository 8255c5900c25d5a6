package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// rssWatch follows a process's resident memory during a scenario, whose target with 2,000 clients is
// a server under 300 MB. Linux keeps the peak (VmHWM) for the
// process's whole life, and the server ran other scenarios before: the watch resets that peak when it
// starts (5 to /proc/PID/clear_refs), and samples VmRSS meanwhile in case the reset is refused.
type rssWatch struct {
	pid     int
	reset   bool   // the peak was reset, so VmHWM is this scenario's
	before  uint64 // VmRSS when the watch started
	peak    uint64
	mu      sync.Mutex
	done    chan struct{}
	stopped sync.WaitGroup
}

// rssSampleEvery is how often a watch samples VmRSS.
const rssSampleEvery = 100 * time.Millisecond

// watchRSS starts watching the resident memory of process pid.
func watchRSS(pid int) *rssWatch {
	w := &rssWatch{pid: pid, done: make(chan struct{})}
	w.before = procStatusBytes(pid, "VmRSS:")
	w.reset = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
	w.stopped.Go(func() {
		tick := time.NewTicker(rssSampleEvery)
		defer tick.Stop()
		for {
			if rss := procStatusBytes(w.pid, "VmRSS:"); rss > 0 {
				w.mu.Lock()
				w.peak = max(w.peak, rss)
				w.mu.Unlock()
			}
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
		}
	})
	return w
}

// stop ends the watch and returns the peak resident memory in bytes since it started: VmHWM when the
// peak could be reset, at least the highest sample, 0 when the process had no /proc/PID/status.
func (w *rssWatch) stop() uint64 {
	close(w.done)
	w.stopped.Wait()
	if w.reset {
		w.peak = max(w.peak, procStatusBytes(w.pid, "VmHWM:"))
	}
	return w.peak
}

// procStatusBytes is the field key (such as "VmRSS:") of /proc/PID/status in bytes, or 0.
func procStatusBytes(pid int, key string) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// fileMargin is what a process needs besides one descriptor per client connection: its database,
// logs, listeners, pipes, and the one connection Kassa shares to the acquirer's host.
const fileMargin = 256

// filesFor is the open files a process needs to hold clients connections.
func filesFor(clients int) uint64 { return uint64(clients) + fileMargin }

// ensureOpenFiles raises this process's limit of open files (RLIMIT_NOFILE) to its hard limit when
// the soft one is below need (Go does so at start-up on Linux; this also says plainly when it cannot
// be done), and fails when even the hard limit is below need.
func ensureOpenFiles(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur >= need {
		return nil
	}
	if lim.Max < need {
		return fmt.Errorf("the clients need %d open files and the hard limit is %d: raise it (ulimit -Hn) or run fewer clients", need, lim.Max)
	}
	lim.Cur = lim.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}

// checkOpenFiles fails when process pid (a server this program started) may not open need files,
// by its soft limit in /proc/PID/limits. A server whose limit cannot be read passes.
func checkOpenFiles(pid int, what string, need uint64) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Max open files"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 || f[0] == "unlimited" {
				return nil
			}
			soft, err := strconv.ParseUint(f[0], 10, 64)
			if err == nil && soft < need {
				return fmt.Errorf("%s may open %d files and its clients need %d: raise the limit (ulimit -n) or run fewer clients", what, soft, need)
			}
			return nil
		}
	}
	return nil
}
