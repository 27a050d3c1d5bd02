package main

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/metrics"
)

// scrape reads one metric's value from the server's /metrics under exactly
// the labels given: a counter's total, or a histogram's count.
func scrape(t *testing.T, url string, d *metrics.Desc, labels map[string]string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	if labels == nil {
		labels = map[string]string{}
	}
	for _, m := range fams[d.Name].GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if !maps.Equal(got, labels) {
			continue
		}
		if h := m.GetHistogram(); h != nil {
			return float64(h.GetSampleCount())
		}
		return m.GetCounter().GetValue()
	}
	return 0
}

// TestMetricsEndpoint runs the real server with -metrics-addr, raises two
// expectations (one lapses and its task is delivered, a fact satisfies the
// other) and scrapes /metrics until each counter shows what happened.
func TestMetricsEndpoint(t *testing.T) {
	bin := buildServer(t)
	// Off by default: the API does not serve /metrics.
	off := startServer(t, bin, "-data", t.TempDir())
	if code, _ := off.call(t, "GET", "/metrics", nil); code != 404 {
		t.Errorf("GET /metrics on the API without -metrics-addr answered %d, want 404", code)
	}
	off.kill9()

	s := startServer(t, bin, "-data", t.TempDir(), "-metrics-addr", "127.0.0.1:0")
	defer s.kill9()
	if s.metrics == "" || s.metrics == s.url+"/metrics" {
		t.Fatalf("metrics at %q, want a listener of its own", s.metrics)
	}
	ag := a2atest.NewAgent(t, "1.0")
	if code, b := s.call(t, "PUT", "/v1/agents/agent-1", ag.Card()); code != 200 {
		t.Fatalf("card: %d %s", code, b)
	}
	due := expect.FormatTime(time.Now().Add(300 * time.Millisecond))
	later := expect.FormatTime(time.Now().Add(time.Hour))
	exp := func(id, due string) map[string]any {
		return map[string]any{"expectationId": id, "kind": "payment", "subject": map[string]any{"type": "invoice", "id": id},
			"expects": "paid", "satisfiedBy": map[string]any{"factKey": "paid." + id}, "dueAt": due, "basis": "contract"}
	}
	if code, b := s.call(t, "POST", "/v1/agents/agent-1/expectations", map[string]any{"taskId": "t", "contextId": "c",
		"expectations": []any{exp("soon", due), exp("kept", later)}}); code != 200 {
		t.Fatalf("raise: %d %s", code, b)
	}
	if code, b := s.call(t, "POST", "/v1/agents/agent-1/facts", map[string]any{"facts": []any{
		map[string]any{"factKey": "paid.kept", "observedAt": expect.FormatTime(time.Now())}}}); code != 200 {
		t.Fatalf("fact: %d %s", code, b)
	}
	ag.WaitFor(1, 20*time.Second)

	want := []struct {
		d      *metrics.Desc
		labels map[string]string
		value  float64
	}{
		{metrics.ExpectationsRaised, nil, 2},
		{metrics.ExpectationsSatisfied, map[string]string{"timing": "on_time"}, 1},
		{metrics.ExpectationsLapsed, map[string]string{"lapse": "overdue"}, 1},
		{metrics.LapseLateness, map[string]string{"lapse": "overdue"}, 1},
		{metrics.DeliveryAttempts, nil, 1},
		{metrics.DeliveryFailures, nil, 0},
		{metrics.DeadLetters, nil, 0},
		{metrics.HTTPRequests, map[string]string{"route": "POST /v1/agents/{agentId}/expectations", "status": "200"}, 1},
		{metrics.HTTPRequests, map[string]string{"route": "PUT /v1/agents/{agentId}", "status": "200"}, 1},
		{metrics.HTTPLatency, map[string]string{"route": "POST /v1/agents/{agentId}/facts"}, 1},
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, w := range want {
		for {
			got := scrape(t, s.metrics, w.d, w.labels)
			if got == w.value {
				break
			}
			if got > w.value || time.Now().After(deadline) {
				t.Fatalf("%s%v = %v, want %v", w.d.Name, w.labels, got, w.value)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if n := scrape(t, s.metrics, metrics.FeedLag, nil); n == 0 {
		t.Error("no change-feed lag observed")
	}
}
