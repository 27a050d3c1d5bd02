package emf_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/metrics/emf"
	"github.com/agentclock/clockwork/internal/metrics/emf/emftest"
)

func flush(t *testing.T, r *emf.Recorder) []emftest.Doc {
	t.Helper()
	var buf bytes.Buffer
	if err := r.Flush(&buf); err != nil {
		t.Fatal(err)
	}
	docs, err := emftest.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func TestCountersAndHistogramsByDimensions(t *testing.T) {
	r := emf.New("Clockwork/test")
	r.Record(metrics.ExpectationsRaised, 1)
	r.Record(metrics.ExpectationsRaised, 2)
	r.Record(metrics.ExpectationsLapsed, 1, "overdue")
	r.Record(metrics.ExpectationsLapsed, 1, "stalled")
	r.Record(metrics.ExpectationsLapsed, 1, "overdue")
	r.Record(metrics.HTTPRequests, 1, "POST /v1/agents/{agentId}/facts", "200")
	r.Record(metrics.HTTPLatency, 0.25, "POST /v1/agents/{agentId}/facts")
	r.Record(metrics.HTTPLatency, 0.5, "POST /v1/agents/{agentId}/facts")
	r.Record(metrics.HTTPRequests, 1, "only one label") // dropped

	docs := flush(t, r)
	for _, d := range docs {
		if d.Namespace != "Clockwork/test" {
			t.Errorf("namespace %q", d.Namespace)
		}
	}
	if got := emftest.Sum(docs, metrics.ExpectationsRaised.Name, nil); got != 3 {
		t.Errorf("raised %v, want 3", got)
	}
	if got := emftest.Sum(docs, metrics.ExpectationsLapsed.Name, map[string]string{"lapse": "overdue"}); got != 2 {
		t.Errorf("lapsed overdue %v, want 2", got)
	}
	if got := emftest.Sum(docs, metrics.ExpectationsLapsed.Name, map[string]string{"lapse": "stalled"}); got != 1 {
		t.Errorf("lapsed stalled %v, want 1", got)
	}
	route := "POST /v1/agents/{agentId}/facts"
	if got := emftest.Sum(docs, metrics.HTTPRequests.Name, map[string]string{"route": route, "status": "200"}); got != 1 {
		t.Errorf("requests %v, want 1", got)
	}
	if got := emftest.SumAll(docs, metrics.HTTPRequests.Name); got != 1 {
		t.Errorf("requests with any dimensions %v, want 1 (the mislabelled one dropped)", got)
	}
	if n, s := emftest.Count(docs, metrics.HTTPLatency.Name, map[string]string{"route": route}), emftest.Sum(docs, metrics.HTTPLatency.Name, map[string]string{"route": route}); n != 2 || s != 0.75 {
		t.Errorf("latency %d values summing to %v, want 2 summing to 0.75", n, s)
	}
	for _, d := range docs {
		if u := d.Units[metrics.HTTPLatency.Name]; u != "" && u != "Seconds" {
			t.Errorf("latency unit %q", u)
		}
	}
	// A flush starts afresh: nothing recorded writes nothing.
	var buf bytes.Buffer
	if err := r.Flush(&buf); err != nil || buf.Len() != 0 {
		t.Errorf("second flush wrote %q (%v), want nothing", buf.String(), err)
	}
}

// A document holds at most 100 metrics and a metric at most 100 values;
// the rest go to further documents, and nothing is lost.
func TestSpecificationBounds(t *testing.T) {
	r := emf.New("")
	many := make([]*metrics.Desc, 150)
	for i := range many {
		many[i] = &metrics.Desc{Name: fmt.Sprintf("clockwork_test_%03d_total", i), Kind: metrics.Counter, Unit: "Count", Labels: []string{"x"}}
		r.Record(many[i], float64(i), "a")
	}
	for i := 0; i < 250; i++ {
		r.Record(metrics.FeedLag, float64(i)/1000)
	}
	var buf bytes.Buffer
	if err := r.Flush(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	docs, err := emftest.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	// 150 counters under one dimension set: 2 documents; 250 values: 3.
	if len(lines) != 5 || len(docs) != 5 {
		t.Fatalf("%d lines, %d documents; want 5", len(lines), len(docs))
	}
	for i, d := range many {
		if got := emftest.Sum(docs, d.Name, map[string]string{"x": "a"}); got != float64(i) {
			t.Errorf("%s = %v, want %d", d.Name, got, i)
		}
	}
	if n := emftest.Count(docs, metrics.FeedLag.Name, nil); n != 250 {
		t.Errorf("%d lag values, want 250", n)
	}
	for _, d := range docs {
		if d.Namespace != emf.DefaultNamespace {
			t.Errorf("namespace %q, want the default", d.Namespace)
		}
	}
}

// An empty DimensionSet is written as [[]], which the specification allows.
func TestNoDimensions(t *testing.T) {
	r := emf.New("N")
	r.Record(metrics.DeadLetters, 1)
	var buf bytes.Buffer
	_ = r.Flush(&buf)
	if !strings.Contains(buf.String(), `"Dimensions":[[]]`) {
		t.Errorf("document %s has no empty DimensionSet", buf.String())
	}
}

// A value JSON cannot hold is dropped rather than spoil the document
// that holds it.
func TestNaNIsDropped(t *testing.T) {
	r := emf.New("N")
	r.Record(metrics.FeedLag, math.NaN())
	r.Record(metrics.DeadLetters, 1)
	docs := flush(t, r)
	if emftest.Sum(docs, metrics.DeadLetters.Name, nil) != 1 {
		t.Errorf("dead letters lost: %+v", docs)
	}
}

// FlushAfter writes the invocation's metrics when the handler returns,
// error or not.
func TestFlushAfterEachInvocation(t *testing.T) {
	r := emf.New("N")
	var out bytes.Buffer
	h := emf.FlushAfter(r, &out, func(ctx context.Context, n int) (int, error) {
		r.Record(metrics.DeliveryAttempts, float64(n))
		if n == 2 {
			return 0, errors.New("failed")
		}
		return n, nil
	})
	for n := 1; n <= 2; n++ {
		before := out.Len()
		_, _ = h(context.Background(), n)
		docs, err := emftest.Parse(out.Bytes()[before:])
		if err != nil {
			t.Fatal(err)
		}
		if got := emftest.Sum(docs, metrics.DeliveryAttempts.Name, nil); got != float64(n) {
			t.Errorf("invocation %d flushed %v attempts, want %d", n, got, n)
		}
	}
}
