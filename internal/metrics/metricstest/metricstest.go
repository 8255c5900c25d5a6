// Package metricstest reads a Prometheus exposition in tests: the numbers a scrape reports, by series
// and labels.
package metricstest

import (
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Exposition is a scraped exposition by metric name.
type Exposition map[string]*dto.MetricFamily

// Scrape reads the exposition at url in the text format.
func Scrape(t testing.TB, url string) Exposition {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// Sample is the first sample of name whose labels include labels.
func (e Exposition) Sample(name string, labels map[string]string) (*dto.Metric, bool) {
	if m := e.samples(name, labels); len(m) > 0 {
		return m[0], true
	}
	return nil, false
}

// samples are the samples of name whose labels have the values in labels ("": the label is absent or
// empty).
func (e Exposition) samples(name string, labels map[string]string) []*dto.Metric {
	f := e[name]
	if f == nil {
		return nil
	}
	var out []*dto.Metric
	for _, m := range f.Metric {
		has := map[string]string{}
		for _, l := range m.Label {
			has[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range labels {
			ok = ok && has[k] == v
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// Value sums the samples of name whose labels include labels: counters' and gauges' values,
// histograms' counts.
func (e Exposition) Value(name string, labels map[string]string) float64 {
	var sum float64
	for _, m := range e.samples(name, labels) {
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}
