// Command load measures the embedded default through its HTTP API and
// prints the figures: the throughput table (raises, facts and execution
// events per second from -c connections with latency percentiles and the
// server's CPU time per request, durable commits, each beside an HTTP+JSON
// ceiling served on the same listener setup, with the ratios), how late
// lapses fire with many timers pending, and the cost of a fact as open
// expectations grow.
//
//	go run ./internal/tools/load -phases throughput -duration 10s -c 32   # the table only
//	go run ./internal/tools/load -pending 100000 -open 1000000           # everything
//
// Traffic goes only to a server this command starts on 127.0.0.1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentclock/clockwork/client"
	"github.com/agentclock/clockwork/internal/a2aout"
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
	lapsePrefix  = new(string)
	openSmall    = flag.Int("open-small", 10000, "open expectations for the first fact-cost measurement")
	openLarge    = flag.Int("open", 1000000, "open expectations for the second fact-cost measurement (0 skips)")
	dataDir      = flag.String("data", "", "data directory (default: a temporary one)")
	seedPath     = flag.String("seed", "internal/anticipate/testdata/seed_anticipate.json", "the seed ANTICIPATE used for the event phase")
	phases       = flag.String("phases", "throughput,lapse,factcost", "phases to run, comma-separated: throughput (the table against the ceiling), lapse (lapse latency), factcost (fact cost as open expectations grow)")
	cpuProfile   = flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	blockProfile = flag.String("blockprofile", "", "write a blocking profile of the whole run here")
	ops          = flag.String("ops", "raise,fact,event", "operations of the throughput table, comma-separated: raise, fact, event (without raise, facts satisfy a pool raised before their phase)")
	bulkPace     = flag.Int("bulk-pace", 0, "raise the fact-cost and lapse phases' bulk expectations at most this many ahead of the change feed, waiting for it to drain (0: as fast as the server takes them)")
	factProfile  = flag.String("factcost-cpuprofile", "", "write a CPU profile of each fact-cost measurement's facts here (suffixed with .s and .L)")
	lapseLast    = flag.Bool("lapse-last", false, "run the lapse-latency phase after the fact-cost phase, among the expectations it left open (with -open 10000000: lapse latency with ten million open)")
	runs         = flag.Int("runs", 1, "run the throughput table this many times (fresh servers and store each time) and print the median and range of each figure")
	serverCPU    = flag.String("server-cpuprofile", "", "write a CPU profile of the clockwork server child of the throughput table here")
)

type runner struct {
	c       *client.Client
	timers  func() int
	drained func() bool
	// freePages is the store's free-list length (bolt.Store.FreePages).
	freePages func() int
}

func main() {
	flag.Parse()
	*lapsePrefix = "l"
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *serveKind != "" {
		if err := serveChild(*serveKind, *dataDir); err != nil {
			fail(err)
		}
		return
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
	if wantPhase("throughput") {
		var all [][]throughputRow
		for i := range max(1, *runs) {
			if i > 0 {
				fmt.Printf("\nrun %d of %d\n", i+1, *runs)
			}
			all = append(all, throughputTable(filepath.Join(dir, fmt.Sprintf("throughput-%d", i))))
		}
		printRunsSummary(all)
	}
	if !wantPhase("lapse") && !wantPhase("factcost") {
		return
	}
	dir = filepath.Join(dir, "inprocess")

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
	r := &runner{timers: a.Timers.Len, freePages: a.Store.FreePages, drained: func() bool {
		ch, err := a.Store.ReadFeed(context.Background(), 1)
		return err == nil && len(ch) == 0
	}}
	// Through the public Go client, as agents call it; one attempt per
	// call, so that a failure counts as an error rather than a retry's
	// latency.
	tr := client.NewTransport()
	tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = *concurrency*2, *concurrency*2
	if r.c, err = client.New("http://"+ln.Addr().String(), client.Options{Token: token, HTTPClient: &http.Client{Transport: tr}, MaxAttempts: 1}); err != nil {
		fail(err)
	}
	ctx := context.Background()
	if _, err := r.c.PutCard(ctx, "load", json.RawMessage(loadCard())); err != nil {
		fail(fmt.Errorf("card: %w", err))
	}
	fmt.Printf("\nclockwork in this process: %d cores, GOMAXPROCS %d, %d client connections, durable commits (fsync), data in %s; load average %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), *concurrency, dir, loadAverage())

	farDue := expect.FormatTime(time.Now().Add(240 * time.Hour))
	// Lapse latency with many timers pending.
	if wantPhase("lapse") && *pending > 0 {
		t0 := time.Now()
		r.bulkRaise("p", *pending, farDue)
		raised := time.Since(t0)
		// Let the feed process them all before measuring lapses. (The
		// timers hold only the next minutes: these, due far ahead, stay in
		// the store until the timers' window reaches them.)
		for !r.drained() && time.Since(t0) < 2*time.Minute {
			time.Sleep(50 * time.Millisecond)
		}
		fmt.Printf("\n%d pending timers raised in %.1fs, all scheduled after %.1fs; instants held in memory: %d\n", *pending, raised.Seconds(), time.Since(t0).Seconds(), a.Timers.Len())
	}
	if wantPhase("lapse") && !*lapseLast {
		if *heartbeats > 0 {
			lapseLatencyAmongHeartbeats(ctx, r, a, &lateMu, &late, *pending)
		} else {
			lapseLatency(ctx, r, a, &lateMu, &late, *pending)
		}
	}
	// Fact cost as open expectations grow.
	open := *pending
	if wantPhase("factcost") && *openSmall > 0 {
		fmt.Println()
		small := r.factCost("s", *openSmall, farDue)
		open += *openSmall
		if *openLarge > 0 {
			large := r.factCost("L", *openLarge, farDue)
			open += *openLarge
			fmt.Printf("  fact cost ratio %d -> %d open: %.2fx (p50), %.2fx (mean)\n", *openSmall, *openLarge, float64(large.p50)/float64(small.p50), float64(large.mean)/float64(small.mean))
		}
	}
	if wantPhase("lapse") && *lapseLast {
		lapseLatency(ctx, r, a, &lateMu, &late, open)
	}
}

// lapseLatency raises -lapses expectations due over 3 s and prints how late
// their timers fired and their lapses were committed.
func lapseLatency(ctx context.Context, r *runner, a *app.App, lateMu *sync.Mutex, latep *[]time.Duration, open int) {
	lateMu.Lock()
	*latep = (*latep)[:0]
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
			req := client.RaiseRequest{TaskID: "t", ContextID: "c"}
			for j := i; j < i+50 && j < *lapses; j++ {
				due := start.Add(time.Duration(j) * spread / time.Duration(*lapses))
				req.Expectations = append(req.Expectations, expectation(*lapsePrefix, int64(j), expect.FormatTime(due)))
			}
			r.c.Raise(ctx, "load", req)
		}(i)
	}
	wg.Wait()
	// Wait for all lapses to be committed, then read lapsedAt - dueAt.
	deadline := time.Now().Add(time.Minute)
	var committed []time.Duration
	for time.Now().Before(deadline) {
		committed = committed[:0]
		for j := 0; j < *lapses; j++ {
			rec, err := a.Watcher.Get(context.Background(), "load", fmt.Sprintf("%s-%d", *lapsePrefix, j))
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
	fired := slices.Clone(*latep)
	lateMu.Unlock()
	fmt.Printf("\nlapse latency, %d lapses due over %s with %d other expectations open:\n", len(committed), spread, open)
	fmt.Printf("  timer fired after its instant:      p50 %s  p99 %s  max %s\n", pct(fired, 50), pct(fired, 99), pct(fired, 100))
	fmt.Printf("  lapse committed (lapsedAt - dueAt): p50 %s  p99 %s  max %s\n", pct(committed, 50), pct(committed, 99), pct(committed, 100))

}

type nullSender struct{}

func (nullSender) Send(context.Context, expect.Card, a2aout.Message) (string, error) {
	return "lapse-task", nil
}

// wantPhase reports whether -phases names phase.
func wantPhase(phase string) bool { return slices.Contains(strings.Split(*phases, ","), phase) }

// wantOp says whether -ops names the throughput table's operation op.
func wantOp(op string) bool { return slices.Contains(strings.Split(*ops, ","), op) }

func mustTime(s string) time.Time { t, _ := expect.ParseTime(s); return t }

func expectation(prefix string, n int64, due string) client.Expectation {
	id := fmt.Sprintf("%s-%d", prefix, n)
	return client.Expectation{ExpectationID: id, Kind: "payment", Subject: client.Subject{Type: "invoice", ID: id},
		Expects: "invoice is paid", SatisfiedBy: client.SatisfiedBy{FactKey: "paid." + id}, DueAt: due, Basis: "contract"}
}

func raiseBody(prefix string, n int64, count int, due string) client.RaiseRequest {
	req := client.RaiseRequest{TaskID: "t", ContextID: "c"}
	for i := int64(0); i < int64(count); i++ {
		req.Expectations = append(req.Expectations, expectation(prefix, n+i, due))
	}
	return req
}

func factBody(prefix string, n int64) client.Fact {
	return client.Fact{FactKey: fmt.Sprintf("paid.%s-%d", prefix, n), ObservedAt: expect.FormatTime(time.Now())}
}

// status is a call's outcome as the phases count it: 200 for a success,
// the status of an answer that is not one, 0 for a transport error.
func status[T any](_ T, err error) int {
	var e *client.Error
	switch {
	case err == nil:
		return 200
	case errors.As(err, &e):
		return e.Status
	}
	return 0
}

type stats struct {
	p50, p99, mean, max time.Duration
	n                   int     // requests made
	rate                float64 // requests per second
}

// phaseEach runs, from every connection, the operation mk returns for it
// (called once per connection) for the phase duration, and prints
// throughput and latency.
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
	st := stats{p50: pct(lat, 50), p99: pct(lat, 99), max: pct(lat, 100), n: len(lat), rate: rate}
	printPhase(name, st, errors.Load())
	return st
}

// printPhase prints one phase's line: throughput, latency and errors.
func printPhase(name string, s stats, errors int64) {
	fmt.Printf("%-36s %8.0f req/s  p50 %-9s p99 %-9s max %-9s errors %d\n", name, s.rate, s.p50, s.p99, s.max, errors)
}

// bulkRaise raises n expectations in batches of 50, with -bulk-pace
// (if set) at most that many ahead of the change feed.
func (r *runner) bulkRaise(prefix string, n int, due string) {
	if *bulkPace > 0 {
		// Never more than -bulk-pace ahead of the change feed.
		for from := 0; from < n; from += *bulkPace {
			raiseRange(r, prefix, int64(from), int64(min(n, from+*bulkPace)), due)
			for r.drained != nil && !r.drained() {
				time.Sleep(20 * time.Millisecond)
			}
		}
		return
	}
	raiseRange(r, prefix, 0, int64(n), due)
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
	fmt.Printf("fact cost with %d more open expectations (raised in %.1fs, scheduled after %.1fs; %d pages on the store's free list):\n", n, raised.Seconds(), time.Since(t0).Seconds(), r.freePages())
	if *factProfile != "" {
		f, err := os.Create(*factProfile + "." + prefix)
		if err != nil {
			fail(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	var lat []time.Duration
	var sum time.Duration
	cpu0 := processCPU(os.Getpid())
	for i := 0; i < 2000; i++ {
		t := time.Now()
		r.c.ReportFacts(context.Background(), "load", factBody(prefix, int64(i*(n/2000))))
		d := time.Since(t)
		lat = append(lat, d)
		sum += d
	}
	s := stats{p50: pct(lat, 50), p99: pct(lat, 99), mean: sum / time.Duration(len(lat))}
	cpu := (processCPU(os.Getpid()) - cpu0) / time.Duration(len(lat))
	fmt.Printf("  sequential facts: p50 %s  p99 %s  mean %s; CPU per fact (client and server, this process) %s\n", s.p50, s.p99, s.mean, micros(cpu))
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
