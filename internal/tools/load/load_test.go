package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/client"
	"github.com/agentclock/clockwork/internal/expect"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and parentheses, utime 250 and stime 50 ticks.
	line := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 8 0 100 1000000 500 18446744073709551615"
	if got, want := parseStatCPU(line), 300*clockTick; got != want {
		t.Fatalf("parseStatCPU = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "4242 (x", "4242 (x) S 1 2"} {
		if got := parseStatCPU(bad); got != 0 {
			t.Errorf("parseStatCPU(%q) = %v, want 0", bad, got)
		}
	}
}

func TestCeilingHandler(t *testing.T) {
	h := ceilingHandler()
	for _, c := range []struct {
		auth, body string
		want       int
	}{
		{"Bearer " + token, `{"facts":[{"factKey":"k"}]}`, 200},
		{"Bearer other", `{}`, 401},
		{"Bearer " + token, `{"facts":`, 400},
	} {
		req := httptest.NewRequest("POST", "/v1/agents/load/facts", strings.NewReader(c.body))
		req.Header.Set("Authorization", c.auth)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.want {
			t.Errorf("%s %s: %d, want %d", c.auth, c.body, w.Code, c.want)
		}
	}
}

func TestPrintHelpers(t *testing.T) {
	if got := projected(2, 200*time.Microsecond); got != "10000" {
		t.Errorf("projected = %s", got)
	}
	if got := ratio(1, 0); got != "-" {
		t.Errorf("ratio by zero = %s", got)
	}
}

func TestParseWrk(t *testing.T) {
	out := "Running 1s test @ http://127.0.0.1:1\n  2 threads and 4 connections\nCLOCKWORK_WRK 1200 3 2 850 12345 40000 610,605\n"
	res, err := parseWrk(out, 2)
	if err != nil {
		t.Fatal(err)
	}
	if res.n != 1200 || res.errors != 5 || res.p50 != 850*time.Microsecond || res.p99 != 12350*time.Microsecond ||
		res.max != 40*time.Millisecond || !slices.Equal(res.sent, []int64{610, 605}) {
		t.Errorf("parseWrk = %+v", res)
	}
	for _, bad := range []string{"", "CLOCKWORK_WRK 1 2 3", "CLOCKWORK_WRK 1 0 0 1 1 1 5", "CLOCKWORK_WRK 1 0 0 x 1 1 5,5", "CLOCKWORK_WRK 1 0 0 1 1 1 5,y"} {
		if _, err := parseWrk(bad, 2); err == nil {
			t.Errorf("parseWrk(%q): no error", bad)
		}
	}
}

// TestWrkScript runs the real wrk with the table's script against a
// server that checks each request as clockwork's API reads it, and checks
// the numbering the fact pool relies on: thread t's n-th request names
// r<t>-<n>, and the counts wrk reports are what each thread sent.
func TestWrkScript(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("wrk is not installed (.ci/run installs Debian's wrk)")
		}
		t.Skip("wrk is not installed (apt-get install wrk)")
	}
	*concurrency = 4
	const due = "2030-01-01T00:00:00Z"
	for _, op := range []string{"raise", "fact", "event"} {
		t.Run(op, func(t *testing.T) {
			var mu sync.Mutex
			seen := map[string]int{} // thread prefix -> highest n
			var bad []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				id, ok := checkWrkRequest(op, r, b, due)
				mu.Lock()
				defer mu.Unlock()
				if !ok {
					if len(bad) < 3 {
						bad = append(bad, r.Method+" "+r.URL.Path+" "+string(b))
					}
					w.WriteHeader(400)
					return
				}
				pre, n := id.thread, id.n
				seen[pre] = max(seen[pre], n)
				w.Write([]byte(`{"ok":true}`))
			}))
			defer srv.Close()
			res, err := runWrk(srv.URL, op, due, 8, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(bad) > 0 || res.errors > 0 {
				t.Fatalf("%d errors; requests the API would refuse: %q", res.errors, bad)
			}
			if res.n < 10 {
				t.Fatalf("%d requests in 1 s", res.n)
			}
			for th, sent := range res.sent {
				got := seen[strconv.Itoa(th)]
				if got == 0 || int64(got) > sent {
					t.Errorf("thread %d: highest number served %d, sent %d", th, got, sent)
				}
			}
		})
	}
}

type wrkID struct {
	thread string
	n      int
}

// checkWrkRequest checks one request of the script as the API reads it and
// returns the thread and number it names.
func checkWrkRequest(op string, r *http.Request, body []byte, due string) (wrkID, bool) {
	if r.Method != "POST" || r.Header.Get("Authorization") != "Bearer "+token || r.Header.Get("Content-Type") != "application/json" {
		return wrkID{}, false
	}
	var id string
	switch op {
	case "raise":
		var req client.RaiseRequest
		if r.URL.Path != "/v1/agents/load/expectations" || json.Unmarshal(body, &req) != nil || len(req.Expectations) != 1 {
			return wrkID{}, false
		}
		e := req.Expectations[0]
		if e.Subject.ID != e.ExpectationID || e.SatisfiedBy.FactKey != "paid."+e.ExpectationID || e.DueAt != due {
			return wrkID{}, false
		}
		id = e.ExpectationID
	case "fact":
		var req struct{ Facts []client.Fact }
		if r.URL.Path != "/v1/agents/load/facts" || json.Unmarshal(body, &req) != nil || len(req.Facts) != 1 {
			return wrkID{}, false
		}
		if _, err := expect.ParseTime(req.Facts[0].ObservedAt); err != nil {
			return wrkID{}, false
		}
		id, _ = strings.CutPrefix(req.Facts[0].FactKey, "paid.")
	case "event":
		var ev client.Event
		plan, ok := strings.CutPrefix(r.URL.Path, "/v1/executions/plan-load-")
		plan, ok2 := strings.CutSuffix(plan, "/events")
		k, err := strconv.Atoi(plan)
		if !ok || !ok2 || err != nil || k < 0 || k >= 8*wrkThreads() || json.Unmarshal(body, &ev) != nil || ev.MessageType != "TOOL_REQUEST" {
			return wrkID{}, false
		}
		if _, err := expect.ParseTime(ev.Timestamp); err != nil || !json.Valid(ev.Arguments) {
			return wrkID{}, false
		}
		// ev-<t>-<n> on a plan of thread t (plan mod threads).
		rest, _ := strings.CutPrefix(ev.EventID, "ev-")
		th, _, _ := strings.Cut(rest, "-")
		if tn, err := strconv.Atoi(th); err != nil || k%wrkThreads() != tn {
			return wrkID{}, false
		}
		id = "r" + rest
	}
	rest, ok := strings.CutPrefix(id, "r")
	th, num, ok2 := strings.Cut(rest, "-")
	n, err := strconv.Atoi(num)
	if !ok || !ok2 || err != nil || n < 1 {
		return wrkID{}, false
	}
	return wrkID{thread: th, n: n}, true
}

func TestSpread(t *testing.T) {
	if got := spread([]float64{5, 1, 3}, "%.0f"); got != "3 (1–5)" {
		t.Errorf("odd count: %s", got)
	}
	if got := spread([]float64{4, 1, 2, 3}, "%.1f"); got != "2.5 (1.0–4.0)" {
		t.Errorf("even count: %s", got)
	}
	if got := spread(nil, "%.0f"); got != "-" {
		t.Errorf("empty: %s", got)
	}
}
