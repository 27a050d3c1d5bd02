package judge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/agentclock/clockwork/internal/judge"
	"github.com/agentclock/clockwork/internal/metrics"
)

// recorder keeps what it is given, by metric and label values.
type recorder struct {
	mu     sync.Mutex
	values map[string][]float64
}

func (r *recorder) Record(d *metrics.Desc, v float64, labels ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := d.Name
	for _, l := range labels {
		k += "/" + l
	}
	r.values[k] = append(r.values[k], v)
}

// With Metrics, the judge New builds counts each call, each call that
// returned no grade and the time of each, under its kind.
func TestInstrumentedJudge(t *testing.T) {
	var got []byte
	ok := newJudgeServer(t, &got)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }))
	defer failing.Close()
	rec := &recorder{values: map[string][]float64{}}
	good, err := judge.New(context.Background(), judge.Config{URL: ok, AllowPrivate: true, Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := judge.New(context.Background(), judge.Config{Kind: judge.KindHTTP, URL: failing.URL, AllowPrivate: true, Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := good.Judge(context.Background(), request()); err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Judge(context.Background(), request()); err == nil {
		t.Fatal("a 500 gave a grade")
	}
	if n := len(rec.values["clockwork_judge_calls_total/http"]); n != 2 {
		t.Errorf("%d calls counted, want 2", n)
	}
	if n := len(rec.values["clockwork_judge_failures_total/http"]); n != 1 {
		t.Errorf("%d failures counted, want 1", n)
	}
	if vs := rec.values["clockwork_judge_duration_seconds/http"]; len(vs) != 2 || vs[0] < 0 {
		t.Errorf("latencies %v, want two", vs)
	}
	// Without Metrics, New returns the judge itself.
	plain, _ := judge.New(context.Background(), judge.Config{URL: ok, AllowPrivate: true})
	if _, isClient := plain.(*judge.Client); !isClient {
		t.Errorf("without Metrics New returned %T", plain)
	}
}
