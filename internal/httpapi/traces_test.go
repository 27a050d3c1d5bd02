package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/evaluation"
)

// heldExporter holds every export until release is closed.
type heldExporter struct {
	entered chan struct{}
	release chan struct{}
}

func (x heldExporter) Export(ctx context.Context, _ []byte, _ bool, _ evaluation.Caller) ([]byte, error) {
	x.entered <- struct{}{}
	<-x.release
	return []byte("{}"), nil
}

// TestTracesBounds: exports beyond the ones taken at once wait for a slot,
// then get 429 with Retry-After (the OTLP/HTTP throttling answer); a body
// past its bound is a 413 naming it.
func TestTracesBounds(t *testing.T) {
	token := auth.Generate()
	a, err := auth.New([]auth.TokenSpec{{Token: token, Principal: "p", Scopes: auth.AllScopes, Agents: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	h := testHandler(t)
	h.Auth = a
	x := heldExporter{entered: make(chan struct{}, 4), release: make(chan struct{})}
	h.Traces = x
	h.SetTracesLimits(TracesLimits{Concurrent: 1, Body: 1 << 10, QueueWait: 50 * time.Millisecond})
	post := func(body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/v1/traces", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var first *httptest.ResponseRecorder
	go func() { defer wg.Done(); first = post(`{}`) }()
	<-x.entered
	second := post(`{}`)
	if second.Code != http.StatusTooManyRequests || second.Header().Get("Retry-After") == "" {
		t.Fatalf("a second export at once: %d, Retry-After %q", second.Code, second.Header().Get("Retry-After"))
	}
	close(x.release)
	wg.Wait()
	if first.Code != http.StatusOK {
		t.Fatalf("the first export: %d %s", first.Code, first.Body)
	}
	big := post(`{"x":"` + string(bytes.Repeat([]byte("a"), 2<<10)) + `"}`)
	if big.Code != http.StatusRequestEntityTooLarge || !strings.Contains(big.Body.String(), "1024 bytes") {
		t.Fatalf("a body past its bound: %d %s", big.Code, big.Body)
	}
}
