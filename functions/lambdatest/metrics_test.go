package lambdatest

import (
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/metrics/emf/emftest"
)

// MetricsNamespace is the functions' METRICS_NAMESPACE here.
const MetricsNamespace = "Clockwork/lambdatest"

// emfDocs returns the Embedded Metric Format documents a function wrote on
// stdout, each checked against the specification, once the emulator has
// reported the end of its last invocation (its output is all in by then).
func (f *function) emfDocs(t *testing.T) []emftest.Doc {
	t.Helper()
	if _, ok := f.logs.report(f.lastID, 10*time.Second); !ok {
		t.Errorf("%s: no REPORT line for its last invocation %s", f.name, f.lastID)
	}
	f.logs.mu.Lock()
	out := append([]byte(nil), f.logs.emf...)
	f.logs.mu.Unlock()
	docs, err := emftest.Parse(out)
	if err != nil {
		t.Fatalf("%s wrote an invalid EMF document: %v", f.name, err)
	}
	for _, d := range docs {
		if d.Namespace != MetricsNamespace {
			t.Errorf("%s: namespace %q, want %q (METRICS_NAMESPACE)", f.name, d.Namespace, MetricsNamespace)
		}
	}
	return docs
}

// checkMetrics checks that the counters of each function moved by what its
// invocations did: every api request counted under its route template and
// status, the clock's overdue lapse (with its lateness), the stream's
// failed delivery attempt and its VERIFY.
func checkMetrics(t *testing.T, api, clock, stream *function) {
	t.Helper()
	apiDocs := api.emfDocs(t)
	if got := emftest.SumAll(apiDocs, metrics.HTTPRequests.Name); got != float64(api.seq) {
		t.Errorf("api: %v requests counted, want %d (one per invocation)", got, api.seq)
	}
	for _, c := range []struct {
		route, status string
		want          float64
	}{
		{"POST /v1/agents/{agentId}/expectations", "200", 1},
		{"POST /v1/executions/{planId}/events", "202", 4},
		{"GET /healthz", "200", 1},
	} {
		if got := emftest.Sum(apiDocs, metrics.HTTPRequests.Name, map[string]string{"route": c.route, "status": c.status}); got != c.want {
			t.Errorf("api: %s %s counted %v times, want %v", c.route, c.status, got, c.want)
		}
	}
	if got := emftest.SumAll(apiDocs, metrics.ExpectationsRaised.Name); got < 1 {
		t.Errorf("api: %v expectations raised, want at least the sample raise's", got)
	}

	clockDocs := clock.emfDocs(t)
	overdue := map[string]string{"lapse": "overdue"}
	if got := emftest.Sum(clockDocs, metrics.ExpectationsLapsed.Name, overdue); got != 1 {
		t.Errorf("clock: %v overdue lapses counted, want 1 (%s)", got, Lapsing)
	}
	if n := emftest.Count(clockDocs, metrics.LapseLateness.Name, overdue); n != 1 {
		t.Errorf("clock: %d lapse lateness values, want 1", n)
	}

	streamDocs := stream.emfDocs(t)
	if got := emftest.Sum(streamDocs, metrics.DeliveryAttempts.Name, nil); got != 1 {
		t.Errorf("stream: %v delivery attempts, want 1 (the lapse task to an agent that refuses connections)", got)
	}
	if got := emftest.Sum(streamDocs, metrics.DeliveryFailures.Name, nil); got != 1 {
		t.Errorf("stream: %v delivery failures, want 1", got)
	}
	if got := emftest.Sum(streamDocs, metrics.Verifications.Name, map[string]string{"verdict": "PASS"}); got != 1 {
		t.Errorf("stream: %v PASS verifications, want 1", got)
	}
	if n := emftest.Count(streamDocs, metrics.FeedLag.Name, nil); n == 0 {
		t.Error("stream: no change-feed lag observed")
	}
	t.Logf("EMF documents written: api %d, clock %d, stream %d", len(apiDocs), len(clockDocs), len(streamDocs))
}
