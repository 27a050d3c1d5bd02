package prom_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/metrics/prom"
)

// Every metric of the catalogue is exported; what is recorded moves it;
// a mislabelled record or a negative increment is dropped, not a panic.
func TestRecordAndScrape(t *testing.T) {
	r := prom.New()
	r.Record(metrics.ExpectationsRaised, 1)
	r.Record(metrics.ExpectationsRaised, 1)
	r.Record(metrics.ExpectationsRaised, -5)
	r.Record(metrics.ExpectationsSatisfied, 1, metrics.Late)
	r.Record(metrics.LapseLateness, 0.2, "overdue")
	r.Record(metrics.HTTPRequests, 1, "GET /healthz") // one label of two: dropped
	r.Record(&metrics.Desc{Name: "clockwork_unknown_total", Kind: metrics.Counter}, 1)

	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	if got := fams[metrics.ExpectationsRaised.Name].GetMetric()[0].GetCounter().GetValue(); got != 2 {
		t.Errorf("raised %v, want 2", got)
	}
	sat := fams[metrics.ExpectationsSatisfied.Name].GetMetric()
	if len(sat) != 1 || sat[0].GetLabel()[0].GetValue() != metrics.Late || sat[0].GetCounter().GetValue() != 1 {
		t.Errorf("satisfied %v", sat)
	}
	h := fams[metrics.LapseLateness.Name].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() != 0.2 {
		t.Errorf("lateness count %d sum %v", h.GetSampleCount(), h.GetSampleSum())
	}
	if _, ok := fams[metrics.HTTPRequests.Name]; ok {
		t.Errorf("a mislabelled request was counted")
	}
	// Label-less metrics are exported from the start; every name is ours.
	for _, d := range metrics.All() {
		if !strings.HasPrefix(d.Name, "clockwork_") {
			t.Errorf("%s does not start with clockwork_", d.Name)
		}
		if len(d.Labels) == 0 && d.Kind != metrics.Gauge { // a gauge: once its function is registered (TestGaugeFunc)
			if _, ok := fams[d.Name]; !ok {
				t.Errorf("%s is not exported before its first event", d.Name)
			}
		}
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Errorf("the Go runtime's metrics are missing")
	}
}

// TestGaugeFunc: a gauge of the catalogue is exported with the value its
// registered function returns at each scrape.
func TestGaugeFunc(t *testing.T) {
	r := prom.New()
	v := 7.0
	r.GaugeFunc(metrics.StoreFileBytes, func() float64 { return v })
	r.GaugeFunc(metrics.ExpectationsRaised, func() float64 { return 1 }) // not a gauge: ignored
	for _, want := range []float64{7, 9} {
		v = want
		fams, err := r.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range fams {
			if f.GetName() == metrics.StoreFileBytes.Name {
				found = true
				if got := f.GetMetric()[0].GetGauge().GetValue(); got != want {
					t.Fatalf("gauge %v, want %v", got, want)
				}
			}
		}
		if !found {
			t.Fatal("the gauge is not exported")
		}
	}
}
