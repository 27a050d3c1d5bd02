package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/client"
)

// flaky answers the first len(fails) requests with fails[i] (0 drops the
// connection), then 200 with ok. It records every body it received.
type flaky struct {
	mu     sync.Mutex
	fails  []int
	header http.Header
	ok     string
	bodies []string
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.bodies)
	f.bodies = append(f.bodies, string(b))
	f.mu.Unlock()
	if n < len(f.fails) {
		switch code := f.fails[n]; code {
		case 0:
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		default:
			for k, v := range f.header {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(code)
			io.WriteString(w, `{"type":"about:blank","title":"`+http.StatusText(code)+`","status":`+strconv.Itoa(code)+`,"detail":"try later"}`)
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, f.ok)
}

func (f *flaky) attempts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}

func fastRetries(t *testing.T, url string) *client.Client {
	return newClient(t, url, client.Options{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond})
}

func TestRetriesIdempotentCalls(t *testing.T) {
	for _, fails := range [][]int{{503}, {500, 502, 504}, {429}, {0}, {0, 503, 0}} {
		f := &flaky{fails: fails, ok: `{"facts":[{"factKey":"k","satisfied":["e"]}]}`}
		srv := httptest.NewServer(f)
		c := fastRetries(t, srv.URL)
		out, err := c.ReportFacts(context.Background(), "a", client.Fact{FactKey: "k", ObservedAt: "2026-01-01T00:00:00Z"})
		srv.Close()
		if err != nil || len(out) != 1 || out[0].Satisfied[0] != "e" {
			t.Fatalf("fails %v: %v %+v", fails, err, out)
		}
		bodies := f.attempts()
		if len(bodies) != len(fails)+1 {
			t.Fatalf("fails %v: %d attempts, want %d", fails, len(bodies), len(fails)+1)
		}
		for _, b := range bodies {
			if b != bodies[0] || !strings.Contains(b, `"factKey":"k"`) {
				t.Fatalf("fails %v: the attempts sent different bodies: %q", fails, bodies)
			}
		}
	}
}

func TestRetriesGiveUpAfterMaxAttempts(t *testing.T) {
	f := &flaky{fails: []int{503, 503, 503, 503, 503}, ok: `{}`}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := newClient(t, srv.URL, client.Options{BaseDelay: time.Millisecond, MaxAttempts: 3})
	err := c.DeleteCredentials(context.Background(), "a")
	var e *client.Error
	if !errors.As(err, &e) || e.Status != 503 || e.Detail != "try later" || e.Method != "DELETE" || e.Path != "/v1/agents/a/credentials" || !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("err = %#v", err)
	}
	if n := len(f.attempts()); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
}

func TestNoRetryOnClientErrors(t *testing.T) {
	f := &flaky{fails: []int{400, 400}, ok: `{}`}
	srv := httptest.NewServer(f)
	defer srv.Close()
	_, err := fastRetries(t, srv.URL).Raise(context.Background(), "a", client.RaiseRequest{})
	if !errors.Is(err, client.ErrBadRequest) || len(f.attempts()) != 1 {
		t.Fatalf("err %v after %d attempts", err, len(f.attempts()))
	}
}

func TestGradeIsRetriedOnlyWhenNotProcessed(t *testing.T) {
	grade := client.Grade{CriterionID: "c", Score: 1}
	for _, c := range []struct {
		fails    []int
		attempts int
		ok       bool
	}{{[]int{503}, 1, false}, {[]int{500}, 1, false}, {[]int{0}, 1, false}, {[]int{429, 429}, 3, true}} {
		f := &flaky{fails: c.fails, ok: `{"message_type":"VERIFY"}`}
		srv := httptest.NewServer(f)
		_, err := fastRetries(t, srv.URL).SubmitGrade(context.Background(), "v", grade)
		srv.Close()
		if (err == nil) != c.ok || len(f.attempts()) != c.attempts {
			t.Fatalf("fails %v: err %v after %d attempts, want %d", c.fails, err, len(f.attempts()), c.attempts)
		}
	}
	// A connection that cannot be opened was never sent: retried.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := newClient(t, url, client.Options{BaseDelay: time.Millisecond, MaxAttempts: 2})
	_, err := c.SubmitGrade(context.Background(), "v", grade)
	if err == nil || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("grade to a closed port: %v", err)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	f := &flaky{fails: []int{429}, header: http.Header{"Retry-After": {"1"}}, ok: `{"alg":"Ed25519","public_key":"k"}`}
	srv := httptest.NewServer(f)
	defer srv.Close()
	start := time.Now()
	k, err := fastRetries(t, srv.URL).VerifyKey(context.Background())
	if err != nil || k.PublicKey != "k" {
		t.Fatalf("%v %+v", err, k)
	}
	// Not a timing assertion on the server: the client must not have
	// retried before the second the server asked for.
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("retried after %s, before the Retry-After of 1 s", waited)
	}

	// A Retry-After beyond MaxRetryAfter, or beyond the deadline, ends the
	// call with the server's answer at once.
	for _, c := range []struct {
		opts client.Options
		ctx  time.Duration
	}{{client.Options{MaxRetryAfter: time.Second}, 0}, {client.Options{}, 5 * time.Second}} {
		f := &flaky{fails: []int{503}, header: http.Header{"Retry-After": {"30"}}, ok: `{}`}
		srv := httptest.NewServer(f)
		ctx := context.Background()
		if c.ctx > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.ctx)
			defer cancel()
		}
		_, err := newClient(t, srv.URL, c.opts).DeadLetters(ctx)
		srv.Close()
		var e *client.Error
		if !errors.As(err, &e) || e.Status != 503 || e.RetryAfter != 30*time.Second || len(f.attempts()) != 1 {
			t.Fatalf("%+v: err %v after %d attempts", c, err, len(f.attempts()))
		}
	}
}

func TestContextDeadline(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := fastRetries(t, srv.URL).Expectation(ctx, "a", "e")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
	// A deadline reached while waiting to retry ends the call with it.
	f := &flaky{fails: []int{503, 503, 503}, ok: `{}`}
	srv2 := httptest.NewServer(f)
	defer srv2.Close()
	ctx2, cancel2 := context.WithCancel(context.Background())
	c := newClient(t, srv2.URL, client.Options{BaseDelay: time.Hour, MaxDelay: time.Hour})
	go func() {
		for len(f.attempts()) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel2()
	}()
	if _, err := c.DeadLetters(ctx2); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled while waiting: %v", err)
	}
}

func TestAnswerWithoutProblemBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"message":"Forbidden"}`) // API Gateway's own answer
	}))
	defer srv.Close()
	_, err := fastRetries(t, srv.URL).Card(context.Background(), "a")
	var e *client.Error
	if !errors.As(err, &e) || e.Status != 403 || e.Title != "Forbidden" || e.Detail != "Forbidden" || e.Type != "about:blank" || !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("err = %#v", err)
	}
	if errors.Is(err, client.ErrNotFound) {
		t.Fatal("a 403 is ErrNotFound")
	}
}

func TestNewRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://h/", "http://h/?q=1", "http:///x"} {
		if _, err := client.New(u, client.Options{}); err == nil {
			t.Errorf("New(%q) succeeded", u)
		}
	}
	if _, err := client.New("https://abc.execute-api.eu-west-1.amazonaws.com/prod/", client.Options{}); err != nil {
		t.Fatal(err)
	}
}
