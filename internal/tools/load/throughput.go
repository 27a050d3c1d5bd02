package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentclock/clockwork/client"
	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/expect"
)

// measured is one phase of the throughput table against one server.
type measured struct {
	stats
	cpuPerReq time.Duration // the server process's CPU time per request
}

// throughputRow is one operation against the ceiling and against clockwork.
type throughputRow struct {
	name               string
	ceiling, clockwork measured
}

// throughputTable starts the HTTP+JSON ceiling and clockwork (durable
// commits, store under dir) as child processes and runs, for each operation,
// the same requests against the ceiling and then against clockwork, each for
// -duration at -c connections; then it prints the table with the ratios.
func throughputTable(dir string) []throughputRow {
	ceiling, err := startChild("ceiling", dir)
	if err != nil {
		fail(err)
	}
	defer ceiling.stop()
	cw, err := startChild("clockwork", dir)
	if err != nil {
		fail(err)
	}
	defer cw.stop()
	rc, rw := newRunner(ceiling.url), newRunner(cw.url)
	ctx := context.Background()
	if _, err := rw.c.PutCard(ctx, "load", json.RawMessage(loadCard())); err != nil {
		fail(fmt.Errorf("card: %w", err))
	}
	withWrk, why := useWrk()
	plans := *concurrency // one per connection (Go) or per wrk thread's share
	if withWrk {
		// Four times as many plans as connections, so that two of a wrk
		// thread's requests in flight seldom append to one plan.
		plans = 4 * *concurrency
	}
	if err := declarePlans(rw, plans); err != nil {
		fail(err)
	}
	generator := fmt.Sprintf("wrk, %d threads", wrkThreads())
	if !withWrk {
		generator = "the Go client (" + why + ")"
	}
	loadBefore := loadAverage()
	fmt.Printf("throughput: %d cores, %d connections, %s per phase, durable commits (fsync before the answer); servers in child processes; load generator %s; load average %s\n",
		runtime.NumCPU(), *concurrency, *duration, generator, loadBefore)

	// measure runs one phase against c and adds the server's CPU per
	// request, the feed's work for the phase included.
	measure := func(c *child, run func() stats) measured {
		cpu0 := c.cpu()
		s := run()
		c.waitFeed()
		m := measured{stats: s}
		if s.n > 0 {
			m.cpuPerReq = (c.cpu() - cpu0) / time.Duration(s.n)
		}
		return m
	}
	farDue := expect.FormatTime(time.Now().Add(240 * time.Hour))
	var rows []throughputRow
	if withWrk {
		rows = wrkRows(ceiling, cw, rw, measure, farDue, plans)
	} else {
		rows = goRows(ceiling, cw, rc, rw, measure, farDue)
	}
	printThroughputTable(rows, loadBefore, loadAverage())
	return rows
}

// printRunsSummary prints, for each operation, the median of the runs'
// throughput, p99 ratio and server CPU per request, with the range.
func printRunsSummary(runs [][]throughputRow) {
	if len(runs) < 2 {
		return
	}
	fmt.Printf("\n%d runs, median (lowest–highest):\n\n", len(runs))
	fmt.Println("| operation | clockwork req/s | req/s ratio | p99 ratio | server CPU per request |")
	fmt.Println("|---|---|---|---|---|")
	for i, r := range runs[0] {
		var rate, rateRatio, p99Ratio, cpu []float64
		for _, run := range runs {
			if i >= len(run) {
				continue
			}
			c, w := run[i].ceiling, run[i].clockwork
			rate = append(rate, w.rate)
			cpu = append(cpu, float64(w.cpuPerReq)/float64(time.Microsecond))
			if c.rate > 0 && c.p99 > 0 {
				rateRatio = append(rateRatio, w.rate/c.rate)
				p99Ratio = append(p99Ratio, float64(w.p99)/float64(c.p99))
			}
		}
		fmt.Printf("| %s | %s | %s | %s | %s µs |\n", r.name, spread(rate, "%.0f"), spread(rateRatio, "%.2f"), spread(p99Ratio, "%.2f"), spread(cpu, "%.0f"))
	}
}

// spread formats the median of xs and, in parentheses, its range.
func spread(xs []float64, format string) string {
	if len(xs) == 0 {
		return "-"
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf(format+" ("+format+"–"+format+")", med, s[0], s[len(s)-1])
}

// measureFunc runs one phase against a child server and adds the server's
// CPU per request.
type measureFunc func(c *child, run func() stats) measured

// goRows runs the table's phases through the public Go client, one
// goroutine per connection.
func goRows(ceiling, cw *child, rc, rw *runner, measure measureFunc, farDue string) []throughputRow {
	ctx := context.Background()
	phase := func(r *runner, name string, mk func() func() int) func() stats {
		return func() stats { return r.phaseEach(name, mk) }
	}
	var rows []throughputRow

	// Raises, one expectation per request.
	var cseq, seq atomic.Int64
	raise := func(r *runner, seq *atomic.Int64) func() func() int {
		return func() func() int {
			return func() int {
				return status(r.c.Raise(ctx, "load", raiseBody("r", seq.Add(1), 1, farDue)))
			}
		}
	}
	if wantOp("raise") {
		row := throughputRow{name: "raise (1 expectation)"}
		row.ceiling = measure(ceiling, phase(rc, "ceiling, raise body", raise(rc, &cseq)))
		row.clockwork = measure(cw, phase(rw, "raise (1 expectation per request)", raise(rw, &seq)))
		rows = append(rows, row)
	}

	// Facts, each satisfying one open expectation: those just raised and,
	// so that every fact of the phase finds one, a pool raised in bulk
	// (50 per request, before the phase, its feed work done before the
	// phase starts) up to four times as many, at most as many as the
	// ceiling answered.
	raised := seq.Load()
	var pool atomic.Int64
	pool.Store(raised)
	fact := func(r *runner, next *atomic.Int64) func() func() int {
		return func() func() int {
			return func() int {
				n := next.Add(1)
				if p := pool.Load(); n > p {
					n += p // beyond the pool: matches nothing
				}
				return status(r.c.ReportFacts(ctx, "load", factBody("r", n)))
			}
		}
	}
	if wantOp("fact") {
		var cfseq, fseq atomic.Int64
		row := throughputRow{name: "fact (satisfies 1)"}
		row.ceiling = measure(ceiling, phase(rc, "ceiling, fact body", fact(rc, &cfseq)))
		want := cfseq.Load()
		if raised > 0 {
			want = min(want, 4*raised)
		}
		if want > raised {
			raiseRange(rw, "r", raised+1, want+1, farDue)
			pool.Store(want)
			cw.waitFeed()
		}
		row.clockwork = measure(cw, phase(rw, "fact (satisfies 1 expectation)", fact(rw, &fseq)))
		rows = append(rows, row)
		if f, p := fseq.Load(), pool.Load(); f > p {
			fmt.Printf("  (%d of the %d facts matched nothing: more facts than open expectations)\n", f-p, f)
		}
	}

	// Execution events, one plan per connection.
	event := func(r *runner) func() func() int {
		var conn atomic.Int64
		return func() func() int {
			c := conn.Add(1) - 1
			n := 0
			return func() int {
				n++
				return status(r.c.AppendEvent(ctx, fmt.Sprintf("plan-load-%d", c), eventBody(n)))
			}
		}
	}
	if wantOp("event") {
		row := throughputRow{name: "execution event"}
		row.ceiling = measure(ceiling, phase(rc, "ceiling, event body", event(rc)))
		row.clockwork = measure(cw, phase(rw, "execution event (TOOL_REQUEST)", event(rw)))
		rows = append(rows, row)
	}
	return rows
}

// raiseRange raises the expectations <prefix>-from up to (not including)
// <prefix>-to, 50 per request, from -c connections.
func raiseRange(r *runner, prefix string, from, to int64, due string) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, *concurrency)
	for i := from; i < to; i += 50 {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int64) {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := r.c.Raise(context.Background(), "load", raiseBody(prefix, i, int(min(50, to-i)), due)); err != nil {
				fail(fmt.Errorf("bulk raise: %w", err))
			}
		}(i)
	}
	wg.Wait()
}

// printThroughputTable prints the rows as a Markdown table: each operation's
// throughput, latency and server CPU per request beside the ceiling's, the
// ratios, and the throughput the CPU per request projects on this machine's
// cores (what a quiet machine would reach if the server had every core).
func printThroughputTable(rows []throughputRow, before, after string) {
	cores := runtime.NumCPU()
	fmt.Printf("\n%d connections, %s per phase, durable commits; load average %s before, %s after\n\n", *concurrency, *duration, before, after)
	fmt.Println("| operation | ceiling req/s | ceiling p50 / p99 | clockwork req/s | clockwork p50 / p99 | req/s ratio | p99 ratio | CPU per request, ceiling / clockwork | projected req/s on " + fmt.Sprint(cores) + " cores |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		c, w := r.ceiling, r.clockwork
		fmt.Printf("| %s | %.0f | %s / %s | %.0f | %s / %s | %s | %s | %s / %s | %s |\n",
			r.name, c.rate, c.p50, c.p99, w.rate, w.p50, w.p99,
			ratio(w.rate, c.rate), ratio(float64(w.p99), float64(c.p99)),
			micros(c.cpuPerReq), micros(w.cpuPerReq), projected(cores, w.cpuPerReq))
	}
	fmt.Println("\nreq/s ratio: clockwork / ceiling; p99 ratio: clockwork p99 / ceiling p99; CPU per request: the server process's user+system time / requests (/proc/<pid>/stat);")
	fmt.Println("projected: cores / clockwork's CPU per request, the rate a server that had every core to itself would reach (the load generator shares these cores here).")
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func micros(d time.Duration) string {
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

func projected(cores int, perReq time.Duration) string {
	if perReq <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(cores)*float64(time.Second)/float64(perReq))
}

// newRunner calls the server at url through the public Go client, as the
// in-process phases do: one attempt per call, so that a failure counts as
// an error rather than as a retry's latency.
func newRunner(url string) *runner {
	tr := client.NewTransport()
	tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = *concurrency*2, *concurrency*2
	c, err := client.New(url, client.Options{Token: token, HTTPClient: &http.Client{Transport: tr}, MaxAttempts: 1})
	if err != nil {
		fail(err)
	}
	return &runner{c: c}
}

func loadCard() string {
	return fmt.Sprintf(`{"name":"load","description":"load agent","version":"1","supportedInterfaces":[{"url":"http://127.0.0.1:9/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"extensions":[{"uri":%q,"params":{"keepsTime":false,"lapseSkill":"lapse","kinds":[{"kind":"payment","subjectType":"invoice","describes":"An invoice is paid","basis":"contract"}]}}]},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"lapse","name":"lapse","description":"handles lapses","tags":["lapse"]}]}`, expect.URI)
}

// declarePlans declares n ANTICIPATEs (the seed's, renamed), binding
// plan-load-0 to plan-load-<n-1>, so that each connection (or each wrk
// thread) writes its own plans' chains.
func declarePlans(r *runner, n int) error {
	seed, err := os.ReadFile(*seedPath)
	if err != nil {
		return fmt.Errorf("-seed: %w", err)
	}
	for c := range n {
		var m map[string]any
		if err := json.Unmarshal(seed, &m); err != nil {
			return fmt.Errorf("-seed: %w", err)
		}
		m["anticipation_id"], m["plan_id"] = fmt.Sprintf("ant-load-%d", c), fmt.Sprintf("plan-load-%d", c)
		raw, _ := json.Marshal(m)
		signed, err := anticipate.Sign(raw)
		if err != nil {
			return err
		}
		if d, err := r.c.DeclareAnticipation(context.Background(), json.RawMessage(signed)); err != nil || !d.Created {
			return fmt.Errorf("declare: %v", err)
		}
	}
	return nil
}

// eventBody is the n-th TOOL_REQUEST of a plan.
func eventBody(n int) *client.Event {
	return &client.Event{EventID: fmt.Sprintf("ev-%d", n), MessageType: "TOOL_REQUEST",
		Timestamp: expect.FormatTime(time.Now()), Tool: "iam_create_user", Arguments: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}
}
