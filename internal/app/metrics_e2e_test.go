package app

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/metrics/emf"
	"github.com/agentclock/clockwork/internal/metrics/emf/emftest"
	"github.com/agentclock/clockwork/internal/metrics/prom"
)

// metricsProbe reads the metrics a runtime published, the way its operator
// would: on the embedded default by scraping /metrics (the Prometheus
// adapter), in the AWS mode by reading the Embedded Metric Format documents
// the runtime writes (the Lambdas' adapter), each checked against the EMF
// specification and added up across flushes.
type metricsProbe struct {
	t      *testing.T
	prom   *prom.Recorder
	scrape *httptest.Server
	emf    *emf.Recorder
	mu     sync.Mutex
	docs   []emftest.Doc
}

func newMetricsProbe(t *testing.T, aws bool) (*metricsProbe, metrics.Recorder) {
	p := &metricsProbe{t: t}
	if aws {
		p.emf = emf.New("Clockwork/test")
		return p, p.emf
	}
	p.prom = prom.New()
	p.scrape = httptest.NewServer(p.prom.Handler())
	t.Cleanup(p.scrape.Close)
	return p, p.prom
}

// read returns a metric's value under exactly the labels given: a
// counter's total, or a histogram's sum and count of observations.
func (p *metricsProbe) read(d *metrics.Desc, labels map[string]string) (sum float64, count int) {
	p.t.Helper()
	if labels == nil {
		labels = map[string]string{}
	}
	if p.emf != nil {
		var buf bytes.Buffer
		if err := p.emf.Flush(&buf); err != nil {
			p.t.Fatal(err)
		}
		docs, err := emftest.Parse(buf.Bytes())
		if err != nil {
			p.t.Fatalf("EMF document: %v", err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.docs = append(p.docs, docs...)
		return emftest.Sum(p.docs, d.Name, labels), emftest.Count(p.docs, d.Name, labels)
	}
	resp, err := http.Get(p.scrape.URL + "/metrics")
	if err != nil {
		p.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		p.t.Fatalf("scrape: %v\n%s", err, body)
	}
	for _, m := range fams[d.Name].GetMetric() {
		if !maps.Equal(promLabels(m), labels) {
			continue
		}
		if h := m.GetHistogram(); h != nil {
			return h.GetSampleSum(), int(h.GetSampleCount())
		}
		return m.GetCounter().GetValue(), 1
	}
	return 0, 0
}

func promLabels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// counter returns a counter's total.
func (p *metricsProbe) counter(d *metrics.Desc, labels map[string]string) float64 {
	p.t.Helper()
	v, _ := p.read(d, labels)
	return v
}

// waitCounter waits until a counter reaches want (the commit that counts it
// may finish just after the change it counts is visible) and fails if it
// does not, or goes past it.
func (p *metricsProbe) waitCounter(d *metrics.Desc, labels map[string]string, want float64) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := p.counter(d, labels)
		if got == want {
			return
		}
		if got > want || time.Now().After(deadline) {
			p.t.Fatalf("%s%v = %v, want %v", d.Name, labels, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// scenarioMetricsMove runs raises, facts, a withdrawal, a lapse whose task
// goes to the dead letters, a VERIFY graded by a judge and by a person, and
// checks that each counter moved by exactly what happened: on the embedded
// default through /metrics, in the AWS mode through the EMF documents.
func scenarioMetricsMove(t *testing.T) {
	judge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req anticipate.JudgeRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.CriterionID == "oc-j" {
			w.Write([]byte(`{"score": 0.9, "rationale": "looks right"}`))
			return
		}
		w.WriteHeader(500)
	}))
	defer judge.Close()
	probe, rec := newMetricsProbe(t, backendKind == "aws")
	e := startEnv(t, func(c *Config) {
		c.Metrics = rec
		c.JudgeURL, c.AllowPrivateJudge = judge.URL, true
	})
	ag := register(t, e, "1.0")
	ag.FailNext(1000, 500)
	raiseRoute := map[string]string{"route": "POST /v1/agents/{agentId}/expectations", "status": "200"}

	// Raised: three; one lapses (overdue), one is satisfied on time, one
	// withdrawn.
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("late", ts(300*time.Millisecond)))))
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("kept", ts(time.Hour)))))
	gone := raiseBody(payment("gone", ts(time.Hour)))
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", gone))
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", gone)) // an idempotent retry raises nothing
	probe.waitCounter(metrics.ExpectationsRaised, nil, 3)
	probe.waitCounter(metrics.HTTPRequests, raiseRoute, 4)

	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.kept", ts(0))}}))
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.kept", ts(0))}})) // twice changes nothing
	probe.waitCounter(metrics.ExpectationsSatisfied, map[string]string{"timing": metrics.OnTime}, 1)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/withdrawals", map[string]any{"withdraw": []string{"gone"}}))
	probe.waitCounter(metrics.ExpectationsWithdrawn, nil, 1)

	// The lapse, and its task's delivery failing until the dead letters.
	dead := e.waitRecord(agentID, "late", func(r *expect.Record) bool { return r.Delivery != nil && r.Delivery.DeadLettered })
	probe.waitCounter(metrics.ExpectationsLapsed, map[string]string{"lapse": "overdue"}, 1)
	if sum, n := probe.read(metrics.LapseLateness, map[string]string{"lapse": "overdue"}); n != 1 || sum < 0 {
		t.Fatalf("lapse lateness: %d observations summing to %v s, want one of at least 0", n, sum)
	}
	attempts := float64(dead.Delivery.Attempts)
	probe.waitCounter(metrics.DeadLetters, nil, 1)
	probe.waitCounter(metrics.DeliveryAttempts, nil, attempts)
	probe.waitCounter(metrics.DeliveryFailures, nil, attempts)
	// A late fact is a late satisfaction; the lapse stays.
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.late", ts(0))}}))
	probe.waitCounter(metrics.ExpectationsSatisfied, map[string]string{"timing": metrics.Late}, 1)

	// VERIFY: a judge that grades one criterion and fails the other leaves
	// it PENDING; a person's grade then makes it final.
	body := variant(t, "ant-m", "plan-m", func(m map[string]any) {
		m["grading_policy"].(map[string]any)["grader_type"] = "COMPOSITE"
		ex := m["expectations"].(map[string]any)
		ex["outcome_criteria"] = append(ex["outcome_criteria"].([]any),
			map[string]any{"criterion_id": "oc-j", "description": "Tone is professional", "measurement": "HEURISTIC", "assertion": "The summary is professional", "weight": 0.5},
			map[string]any{"criterion_id": "oc-x", "description": "The judge fails on this one", "measurement": "HEURISTIC", "assertion": "x", "weight": 0.5})
	})
	e.must(201, e.call("POST", "/v1/anticipations", body))
	runPlan(t, e, "plan-m", 3, nil, allGood())
	v := e.waitVerification("ant-m")
	if v.Verdict != anticipate.VerdictPending {
		t.Fatalf("verdict %s, want PENDING", v.Verdict)
	}
	probe.waitCounter(metrics.Verifications, map[string]string{"verdict": "PENDING"}, 1)
	// One call for oc-j; oc-x's judge fails each of its attempts.
	tries := float64(e.cfg.JudgeRetry.Attempts)
	probe.waitCounter(metrics.JudgeCalls, map[string]string{"judge": "http"}, 1+tries)
	probe.waitCounter(metrics.JudgeFailures, map[string]string{"judge": "http"}, tries)
	if _, n := probe.read(metrics.JudgeLatency, map[string]string{"judge": "http"}); n != 1+int(tries) {
		t.Fatalf("judge latency: %d observations, want %v", n, 1+tries)
	}
	e.must(200, e.call("POST", "/v1/verifications/"+v.VerificationID+"/grades", map[string]any{"criterion_id": "oc-x", "score": 1}))
	probe.waitCounter(metrics.Grades, map[string]string{"verdict": "PASS"}, 1)

	// HTTP: the route template, never the raw path, and the status.
	e.must(404, e.call("GET", "/v1/agents/"+agentID+"/expectations/nope", nil))
	e.must(404, e.call("GET", "/no/such/route", nil))
	probe.waitCounter(metrics.HTTPRequests, map[string]string{"route": "GET /v1/agents/{agentId}/expectations/{expectationId}", "status": "404"}, 1)
	probe.waitCounter(metrics.HTTPRequests, map[string]string{"route": "unmatched", "status": "404"}, 1)
	if _, n := probe.read(metrics.HTTPLatency, map[string]string{"route": raiseRoute["route"]}); n != 4 {
		t.Fatalf("raise latency: %d observations, want 4", n)
	}
	if _, n := probe.read(metrics.FeedLag, nil); n == 0 {
		t.Fatal("no change-feed lag was observed")
	}

	// Nothing counted twice meanwhile (duplicated stream records, Scheduler
	// firing twice, the sweep): every counter still exactly as above.
	for _, c := range []struct {
		d      *metrics.Desc
		labels map[string]string
		want   float64
	}{
		{metrics.ExpectationsRaised, nil, 3},
		{metrics.ExpectationsSatisfied, map[string]string{"timing": metrics.OnTime}, 1},
		{metrics.ExpectationsSatisfied, map[string]string{"timing": metrics.Late}, 1},
		{metrics.ExpectationsLapsed, map[string]string{"lapse": "overdue"}, 1},
		{metrics.ExpectationsWithdrawn, nil, 1},
		{metrics.DeadLetters, nil, 1},
		{metrics.DeliveryAttempts, nil, attempts},
		{metrics.Verifications, map[string]string{"verdict": "PENDING"}, 1},
		{metrics.HTTPRequests, raiseRoute, 4},
	} {
		if got := probe.counter(c.d, c.labels); got != c.want {
			t.Errorf("%s%v = %v at the end, want %v", c.d.Name, c.labels, got, c.want)
		}
	}
	// No label value is a raw path.
	if probe.emf != nil {
		probe.mu.Lock()
		for _, d := range probe.docs {
			if r := d.Dims["route"]; strings.Contains(r, agentID) {
				t.Errorf("route dimension %q holds an id", r)
			}
		}
		probe.mu.Unlock()
	}
}
