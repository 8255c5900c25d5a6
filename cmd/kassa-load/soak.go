package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// The soak: "kassa-load drill --soak 10m" (make drill SOAK=10m) runs the drill's
// mixed load, without faults, at half the most it was measured to take, and samples the server as it
// goes: resident memory, heap and goroutines, with each interval's rate and p99. A leak shows as growth:
// of resident memory from the first sample to the last, and of goroutines at rest (no request, no
// idle connection) from before the soak to after it — busy, their number follows the connections open
// at the moment. More than --soak-growth per cent of either fails the soak, as does any imbalance of
// the books afterwards.
//
// The soak runs one node on either backend: a leak is a process's, and one process is what is sampled.
// The first sample is taken after one interval, once caches and pools have filled with the load.

// soakMain soaks each backend in turn; it exits 1 when a soak grows too much or its books do not
// balance.
func soakMain(ctx context.Context, c drillConfig, out io.Writer) int {
	fmt.Fprintf(out, "soak: %d clients for %v per backend, no faults but %.0f %% of the acquirer's answers dropped, seed %d\n",
		c.clients, c.soak.duration, 100*c.dropRate, c.seed)
	ok := true
	for _, backend := range c.backends {
		rep, b, err := soak(ctx, c, backend, out)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kassa-load drill --soak: %s: %v\n", backend, err)
			return 1
		}
		b.print(out)
		rep.print(out)
		ok = ok && b.balanced() && rep.holds()
	}
	if !ok {
		fmt.Fprintln(out, "kassa-load drill --soak: failed")
		return 1
	}
	return 0
}

// soakConfig is the soak's part of the drill's flags.
type soakConfig struct {
	duration time.Duration // 0: no soak, the drill
	interval time.Duration // how often the server is sampled
	probe    time.Duration // how long the unpaced load runs to find the maximum
	growth   float64       // the most resident memory or goroutines may grow, in per cent
}

// soakSample is the server at one moment, with the calls answered since the sample before.
type soakSample struct {
	at         time.Duration // since the soak began
	rss, heap  int64         // bytes: resident memory (VmRSS) and the Go heap in use
	goroutines int64         // the fewest seen in the interval
	rate       float64       // calls answered per second in the interval
	p99        time.Duration // of those calls, with their retries
}

// soakReport is one backend's soak.
type soakReport struct {
	backend string
	max     float64 // calls per second the unpaced probe reached
	clients int
	probe   time.Duration
	samples []soakSample
	// rest is the server's goroutines at rest, its clients' idle connections closed: before the
	// soak and after it. Busy, they count the connections and requests of the moment.
	rest  [2]int64
	limit float64 // growth allowed, per cent
}

// soak measures the most calls per second c.clients unpaced clients get answered in c.soak.probe, then
// runs them paced to half that for c.soak.duration, sampling every c.soak.interval, and checks the
// books.
func soak(ctx context.Context, c drillConfig, backend string, progress io.Writer) (*soakReport, *books, error) {
	metricsAddr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	r, err := newRig(ctx, c, backend, 1, "--metrics-addr", metricsAddr)
	if err != nil {
		return nil, nil, err
	}
	defer r.close()
	rep := &soakReport{backend: backend, clients: c.clients, probe: c.soak.probe, limit: c.soak.growth}
	fmt.Fprintf(progress, "%s: soak: %d clients unpaced for %v to find the most they get answered\n", backend, c.clients, c.soak.probe)
	start := time.Now()
	probeCtx, stopProbe := context.WithTimeout(ctx, c.soak.probe)
	r.load(probeCtx, c)
	stopProbe()
	calls := r.fleet.calls()
	rep.max = float64(len(calls)) / time.Since(start).Seconds()
	if len(calls) == 0 {
		return nil, nil, fmt.Errorf("the probe got no answer in %v", c.soak.probe)
	}

	if rep.rest[0], err = atRest(ctx, r, metricsAddr); err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(progress, "%s: soak: %.0f calls/s at most; %.0f/s for %v, sampled every %v\n", backend, rep.max, rep.max/2, c.soak.duration, c.soak.interval)
	r.fleet.pace = rate.NewLimiter(rate.Limit(rep.max/2), 1)
	soakStart := time.Now()
	runCtx, stopRun := context.WithTimeout(ctx, c.soak.duration)
	defer stopRun()
	sampled := make(chan error, 1)
	var samples []soakSample
	go func() {
		defer close(sampled)
		// The server is read every second; an interval's sample is its resident memory and heap at the
		// end, and the fewest goroutines seen in it: requests in flight come and go, a leak raises the
		// floor.
		t := time.NewTicker(time.Second)
		defer t.Stop()
		next := c.soak.interval
		floor := int64(-1)
		for {
			select {
			case <-runCtx.Done():
				// The last interval ends with the run, on the tick the run's end may win: it is
				// sampled now, unless the run ended well before it (interrupted).
				if time.Since(soakStart) < next-c.soak.interval/10 {
					return
				}
			case <-t.C:
			}
			s, err := sampleServer(ctx, r.nodes[0], "http://"+metricsAddr+"/metrics")
			if err != nil {
				sampled <- err
				return
			}
			if floor < 0 || s.goroutines < floor {
				floor = s.goroutines
			}
			if s.at = time.Since(soakStart); s.at < next && runCtx.Err() == nil {
				continue
			}
			s.goroutines, floor, next = floor, -1, next+c.soak.interval
			samples = append(samples, s)
			fmt.Fprintf(progress, "%s: soak: %v: resident %.1f MB, %d goroutines\n", backend, s.at.Round(time.Second), mb(s.rss), s.goroutines)
			if runCtx.Err() != nil {
				return
			}
		}
	}()
	r.load(runCtx, c)
	if err := <-sampled; err != nil {
		return nil, nil, fmt.Errorf("sample the server: %w", err)
	}
	rep.samples = windows(samples, soakStart, r.fleet.calls())
	b, err := r.books(ctx, c, start)
	if err != nil {
		return nil, nil, err
	}
	if rep.rest[1], err = atRest(ctx, r, metricsAddr); err != nil {
		return nil, nil, err
	}
	return rep, b, nil
}

// windows fills in each sample's rate and p99 from the calls answered since the sample before it.
func windows(samples []soakSample, start time.Time, calls []call) []soakSample {
	from := start
	for i := range samples {
		to := start.Add(samples[i].at)
		var took []time.Duration
		for _, c := range calls {
			if c.end.After(from) && !c.end.After(to) {
				took = append(took, c.took)
			}
		}
		samples[i].rate = float64(len(took)) / to.Sub(from).Seconds()
		samples[i].p99 = percentile(took, 0.99)
		from = to
	}
	return samples
}

// percentile is the q-th quantile of ds by the nearest rank (0 when ds is empty).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(float64(len(ds))*q+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// sampleServer reads the node's resident memory from /proc and its goroutines and heap from its
// Prometheus metrics.
func sampleServer(ctx context.Context, n *node, metricsURL string) (soakSample, error) {
	var s soakSample
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.k.cmd.Process.Pid))
	if err != nil {
		return s, err
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest) // "123456 kB"
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || len(f) != 2 || f[1] != "kB" {
				return s, fmt.Errorf("VmRSS: %q", rest)
			}
			s.rss = kb << 10
		}
	}
	req, err := http.NewRequestWithContext(ctx, "GET", metricsURL, nil)
	if err != nil {
		return s, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	values := map[string]*int64{"go_goroutines": &s.goroutines, "go_memstats_heap_inuse_bytes": &s.heap}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if p := values[name]; ok && p != nil {
			f, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return s, fmt.Errorf("%s: %q", name, value)
			}
			*p = int64(f)
			delete(values, name)
		}
	}
	if len(values) > 0 || s.rss == 0 {
		return s, fmt.Errorf("the server's metrics or /proc lack %v", values)
	}
	return s, sc.Err()
}

// atRest is the node's goroutines once its clients' idle connections are closed and the server has
// had a moment to see them go.
func atRest(ctx context.Context, r *rig, metricsAddr string) (int64, error) {
	r.fleet.http.CloseIdleConnections()
	time.Sleep(2 * time.Second)
	s, err := sampleServer(ctx, r.nodes[0], "http://"+metricsAddr+"/metrics")
	return s.goroutines, err
}

// freeAddr is a loopback address with a port free at the moment.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// growth is how much resident memory grew from the first sample to the last, and goroutines at rest
// from before the soak to after it, in per cent.
func (r *soakReport) growth() (rss, goroutines float64) {
	if len(r.samples) >= 2 {
		first, last := r.samples[0], r.samples[len(r.samples)-1]
		rss = 100 * float64(last.rss-first.rss) / float64(first.rss)
	}
	if r.rest[0] > 0 {
		goroutines = 100 * float64(r.rest[1]-r.rest[0]) / float64(r.rest[0])
	}
	return rss, goroutines
}

// holds reports whether the soak sampled at least twice, read the goroutines at rest, and neither
// grew beyond the limit.
func (r *soakReport) holds() bool {
	rss, g := r.growth()
	return len(r.samples) >= 2 && r.rest[0] > 0 && r.rest[1] > 0 && rss < r.limit && g < r.limit
}

func (r *soakReport) print(w io.Writer) {
	fmt.Fprintf(w, "\nsoak %s: %d clients reached %.0f calls/s unpaced (%v); paced to %.0f/s\n", r.backend, r.clients, r.max, r.probe, r.max/2)
	fmt.Fprintf(w, "%8s  %10s  %8s  %11s  %8s  %10s\n", "at", "calls/s", "p99 ms", "resident MB", "heap MB", "goroutines (fewest)")
	for _, s := range r.samples {
		fmt.Fprintf(w, "%8v  %10.1f  %8.1f  %11.1f  %8.1f  %10d\n", s.at.Round(time.Second), s.rate, float64(s.p99.Microseconds())/1000, mb(s.rss), mb(s.heap), s.goroutines)
	}
	rss, g := r.growth()
	verdict := "the soak holds"
	if !r.holds() {
		verdict = "THE SOAK FAILS"
	}
	fmt.Fprintf(w, "%s: resident memory %+.1f %% from the first sample to the last, goroutines at rest %d before and %d after (%+.1f %%); limit %.0f %%: %s\n",
		r.backend, rss, r.rest[0], r.rest[1], g, r.limit, verdict)
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }
