// Command load measures the embedded default through its HTTP API and
// prints the figures: raises and facts per second from a concurrent client
// with latency percentiles (durable commits), how late lapses fire with many
// timers pending, and the cost of a fact as open expectations grow.
//
//	go run ./internal/tools/load                 # the standard run (about a minute)
//	go run ./internal/tools/load -pending 100000 -open 1000000
//
// Traffic goes only to a server this command starts on 127.0.0.1.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout"
	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/app"
	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/expect"
)

const token = "load-token"

var (
	duration     = flag.Duration("duration", 5*time.Second, "length of each throughput phase")
	concurrency  = flag.Int("c", 32, "concurrent client connections")
	pending      = flag.Int("pending", 100000, "timers pending during the lapse-latency phase")
	lapses       = flag.Int("lapses", 2000, "lapses measured in the lapse-latency phase")
	openSmall    = flag.Int("open-small", 10000, "open expectations for the first fact-cost measurement")
	openLarge    = flag.Int("open", 1000000, "open expectations for the second fact-cost measurement (0 skips)")
	dataDir      = flag.String("data", "", "data directory (default: a temporary one)")
	seedPath     = flag.String("seed", "internal/anticipate/testdata/seed_anticipate.json", "the seed ANTICIPATE used for the event phase")
	cpuProfile   = flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	blockProfile = flag.String("blockprofile", "", "write a blocking profile of the whole run here")
)

type runner struct {
	url     string
	client  *http.Client
	timers  func() int
	drained func() bool
}

func main() {
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *blockProfile != "" {
		runtime.SetBlockProfileRate(10000)
		defer func() {
			f, err := os.Create(*blockProfile)
			if err == nil {
				pprof.Lookup("block").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	dir := *dataDir
	if dir == "" {
		d, err := os.MkdirTemp("", "clockwork-load-")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var lateMu sync.Mutex
	var late []time.Duration
	authn, _ := auth.New([]auth.TokenSpec{{Token: token, Principal: "load", Scopes: auth.AllScopes, Agents: []string{"*"}}})
	a, err := app.Start(app.Config{DataDir: dir, Auth: authn, Log: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		AllowPrivateAgents: true, Sender: nullSender{},
		Lateness: func(d time.Duration) { lateMu.Lock(); late = append(late, d); lateMu.Unlock() }})
	if err != nil {
		fail(err)
	}
	defer a.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	srv := &http.Server{Handler: a.Handler}
	go srv.Serve(ln)
	defer srv.Close()
	r := &runner{timers: a.Timers.Len, drained: func() bool {
		ch, err := a.Store.ReadFeed(context.Background(), 1)
		return err == nil && len(ch) == 0
	}, url: "http://" + ln.Addr().String(), client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *concurrency * 2, MaxConnsPerHost: *concurrency * 2}}}
	card := fmt.Sprintf(`{"name":"load","description":"load agent","version":"1","supportedInterfaces":[{"url":"http://127.0.0.1:9/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"extensions":[{"uri":%q,"params":{"keepsTime":false,"lapseSkill":"lapse","kinds":[{"kind":"payment","subjectType":"invoice","describes":"An invoice is paid","basis":"contract"}]}}]},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"lapse","name":"lapse","description":"handles lapses","tags":["lapse"]}]}`, expect.URI)
	if code := r.post("PUT", "/v1/agents/load", []byte(card)); code != 200 {
		fail(fmt.Errorf("card: %d", code))
	}
	fmt.Printf("clockwork load: %d cores, GOMAXPROCS %d, %d client connections, durable commits (fsync), data in %s\n\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), *concurrency, dir)

	// 1. Raises.
	var seq atomic.Int64
	farDue := expect.FormatTime(time.Now().Add(240 * time.Hour))
	raiseStats := r.phase("raise (1 expectation per request)", func() int {
		n := seq.Add(1)
		return r.post("POST", "/v1/agents/load/expectations", raiseBody("r", n, 1, farDue))
	})
	// 2. Facts, each satisfying one raised expectation.
	var fseq atomic.Int64
	max := seq.Load()
	r.phase("fact (satisfies 1 expectation)", func() int {
		n := fseq.Add(1)
		if n > max {
			n = max + n // beyond the raised ones: matches nothing, still a full fact
		}
		return r.post("POST", "/v1/agents/load/facts", factBody("r", n))
	})
	_ = raiseStats

	// 3. Execution events, spread over one plan per connection (events of
	// one plan are ordered by its chain, so one writer per plan).
	seed, err := os.ReadFile(*seedPath)
	if err != nil {
		fail(fmt.Errorf("-seed: %w", err))
	}
	for c := 0; c < *concurrency; c++ {
		var m map[string]any
		json.Unmarshal(seed, &m)
		m["anticipation_id"], m["plan_id"] = fmt.Sprintf("ant-load-%d", c), fmt.Sprintf("plan-load-%d", c)
		raw, _ := json.Marshal(m)
		signed, err := anticipate.Sign(raw)
		if err != nil {
			fail(err)
		}
		if code := r.post("POST", "/v1/anticipations", signed); code != 201 {
			fail(fmt.Errorf("declare: %d", code))
		}
	}
	var conn atomic.Int64
	r.phaseEach("execution event (TOOL_REQUEST)", func() func() int {
		c := conn.Add(1) - 1
		n := 0
		return func() int {
			n++
			b, _ := json.Marshal(map[string]any{"event_id": fmt.Sprintf("ev-%d", n), "message_type": "TOOL_REQUEST",
				"timestamp": expect.FormatTime(time.Now()), "tool": "iam_create_user", "arguments": map[string]any{"n": n}})
			code := r.post("POST", fmt.Sprintf("/v1/executions/plan-load-%d/events", c), b)
			if code == 202 {
				return 200
			}
			return code
		}
	})

	// 4. Lapse latency with many timers pending.
	if *pending > 0 {
		t0 := time.Now()
		r.bulkRaise("p", *pending, farDue)
		raised := time.Since(t0)
		// Let the feed schedule them all before measuring lapses.
		for a.Timers.Len() < *pending && time.Since(t0) < 2*time.Minute {
			time.Sleep(50 * time.Millisecond)
		}
		fmt.Printf("\n%d pending timers raised in %.1fs, all scheduled after %.1fs; timers pending: %d\n", *pending, raised.Seconds(), time.Since(t0).Seconds(), a.Timers.Len())
	}
	lateMu.Lock()
	late = late[:0]
	lateMu.Unlock()
	start := time.Now().Add(2 * time.Second)
	spread := 3 * time.Second
	var wg sync.WaitGroup
	sem := make(chan struct{}, *concurrency)
	for i := 0; i < *lapses; i += 50 {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			var es []map[string]any
			for j := i; j < i+50 && j < *lapses; j++ {
				due := start.Add(time.Duration(j) * spread / time.Duration(*lapses))
				es = append(es, expectation("l", int64(j), expect.FormatTime(due)))
			}
			b, _ := json.Marshal(map[string]any{"taskId": "t", "contextId": "c", "expectations": es})
			r.post("POST", "/v1/agents/load/expectations", b)
		}(i)
	}
	wg.Wait()
	// Wait for all lapses to be committed, then read lapsedAt - dueAt.
	deadline := time.Now().Add(time.Minute)
	var committed []time.Duration
	for time.Now().Before(deadline) {
		committed = committed[:0]
		for j := 0; j < *lapses; j++ {
			rec, err := a.Watcher.Get(context.Background(), "load", fmt.Sprintf("l-%d", j))
			if err != nil || rec.Lapse == nil {
				break
			}
			committed = append(committed, mustTime(rec.Lapse.LapsedAt).Sub(mustTime(rec.DueAt)))
		}
		if len(committed) == *lapses {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	lateMu.Lock()
	fired := slices.Clone(late)
	lateMu.Unlock()
	fmt.Printf("\nlapse latency, %d lapses due over %s with %d other timers pending:\n", len(committed), spread, *pending)
	fmt.Printf("  timer fired after its instant:      p50 %s  p99 %s  max %s\n", pct(fired, 50), pct(fired, 99), pct(fired, 100))
	fmt.Printf("  lapse committed (lapsedAt - dueAt): p50 %s  p99 %s  max %s\n", pct(committed, 50), pct(committed, 99), pct(committed, 100))

	// 5. Fact cost as open expectations grow.
	if *openSmall > 0 {
		fmt.Println()
		small := r.factCost("s", *openSmall, farDue)
		if *openLarge > 0 {
			large := r.factCost("L", *openLarge, farDue)
			fmt.Printf("  fact cost ratio %d -> %d open: %.2fx (p50), %.2fx (mean)\n", *openSmall, *openLarge, float64(large.p50)/float64(small.p50), float64(large.mean)/float64(small.mean))
		}
	}
}

type nullSender struct{}

func (nullSender) Send(context.Context, expect.Card, a2aout.Message) (string, error) {
	return "lapse-task", nil
}

func mustTime(s string) time.Time { t, _ := expect.ParseTime(s); return t }

func expectation(prefix string, n int64, due string) map[string]any {
	id := fmt.Sprintf("%s-%d", prefix, n)
	return map[string]any{"expectationId": id, "kind": "payment", "subject": map[string]any{"type": "invoice", "id": id},
		"expects": "invoice is paid", "satisfiedBy": map[string]any{"factKey": "paid." + id}, "dueAt": due, "basis": "contract"}
}

func raiseBody(prefix string, n int64, count int, due string) []byte {
	var es []map[string]any
	for i := int64(0); i < int64(count); i++ {
		es = append(es, expectation(prefix, n+i, due))
	}
	b, _ := json.Marshal(map[string]any{"taskId": "t", "contextId": "c", "expectations": es})
	return b
}

func factBody(prefix string, n int64) []byte {
	b, _ := json.Marshal(map[string]any{"facts": []any{map[string]any{"factKey": fmt.Sprintf("paid.%s-%d", prefix, n), "observedAt": expect.FormatTime(time.Now())}}})
	return b
}

func (r *runner) post(method, path string, body []byte) int {
	req, _ := http.NewRequest(method, r.url+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := r.client.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

type stats struct{ p50, p99, mean time.Duration }

// phase runs op from every connection for the phase duration and prints
// throughput and latency.
func (r *runner) phase(name string, op func() int) stats {
	return r.phaseEach(name, func() func() int { return op })
}

// phaseEach is phase with per-connection state: mk is called once per
// connection and returns that connection's operation.
func (r *runner) phaseEach(name string, mk func() func() int) stats {
	ops := make(chan func() int, *concurrency)
	for c := 0; c < *concurrency; c++ {
		ops <- mk()
	}
	var mu sync.Mutex
	var lat []time.Duration
	var errors atomic.Int64
	stop := time.Now().Add(*duration)
	var wg sync.WaitGroup
	for c := 0; c < *concurrency; c++ {
		wg.Add(1)
		op := <-ops
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(stop) {
				t := time.Now()
				if code := op(); code != 200 {
					errors.Add(1)
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	rate := float64(len(lat)) / duration.Seconds()
	fmt.Printf("%-36s %8.0f req/s  p50 %-9s p99 %-9s max %-9s errors %d\n", name, rate, pct(lat, 50), pct(lat, 99), pct(lat, 100), errors.Load())
	return stats{p50: pct(lat, 50), p99: pct(lat, 99)}
}

// bulkRaise raises n expectations in batches of 50.
func (r *runner) bulkRaise(prefix string, n int, due string) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, *concurrency)
	for i := 0; i < n; i += 50 {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			cnt := min(50, n-i)
			if code := r.post("POST", "/v1/agents/load/expectations", raiseBody(prefix, int64(i), cnt, due)); code != 200 {
				fail(fmt.Errorf("bulk raise: %d", code))
			}
		}(i)
	}
	wg.Wait()
}

// factCost raises open expectations up to n under a fresh prefix and
// measures facts that each satisfy one of them, one client at a time.
func (r *runner) factCost(prefix string, n int, due string) stats {
	t0 := time.Now()
	r.bulkRaise(prefix, n, due)
	raised := time.Since(t0)
	// Measure only once the feed has processed them all (no background work).
	for !r.drained() && time.Since(t0) < 10*time.Minute {
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("fact cost with %d more open expectations (raised in %.1fs, scheduled after %.1fs):\n", n, raised.Seconds(), time.Since(t0).Seconds())
	var lat []time.Duration
	var sum time.Duration
	for i := 0; i < 2000; i++ {
		t := time.Now()
		r.post("POST", "/v1/agents/load/facts", factBody(prefix, int64(i*(n/2000))))
		d := time.Since(t)
		lat = append(lat, d)
		sum += d
	}
	s := stats{p50: pct(lat, 50), p99: pct(lat, 99), mean: sum / time.Duration(len(lat))}
	fmt.Printf("  sequential facts: p50 %s  p99 %s  mean %s\n", s.p50, s.p99, s.mean)
	return s
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s) - 1) * p / 100
	return s[i].Round(10 * time.Microsecond)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "load:", err)
	os.Exit(1)
}
