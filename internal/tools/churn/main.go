// Command churn measures whether the embedded default's data file stops
// growing under steady churn with retention: it builds functions/local,
// starts it on a fresh data directory with -retain-expectations (1 minute
// by default), raises expectations at a steady rate through the HTTP API
// (50 per request, each on a subject of its own) and satisfies each batch
// right after with its facts, N in all, then keeps sampling while the last
// ones expire. Every -every it prints the elapsed time, what was raised and
// satisfied, the data file's size and the disk space it takes, and the
// server's resident memory, as a Markdown table: the curve the README and
// docs/performance.md quote.
//
//	go run ./internal/tools/churn -n 1000000
//	go run ./internal/tools/churn -n 200000 -rate 2000 -retain 30s -tail 2m
//
// The data directory is created under -tmp and deleted at the end (unless
// -keep). Traffic goes only to the server it starts on 127.0.0.1.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/tools/toolserver"
)

const token = "churn-token"

var (
	n      = flag.Int("n", 1000000, "expectations to raise and satisfy")
	rate   = flag.Int("rate", 5000, "expectations raised (and satisfied) per second")
	conc   = flag.Int("c", 8, "concurrent workers (each raises 50 and then reports their 50 facts)")
	retain = flag.String("retain", "1m", "the server's -retain-expectations")
	every  = flag.Duration("every", 15*time.Second, "sampling interval")
	tail   = flag.Duration("tail", 3*time.Minute, "keep sampling this long after the last is satisfied")
	tmp    = flag.String("tmp", os.TempDir(), "where the data directory is created")
	keep   = flag.Bool("keep", false, "keep the data directory")
	bin    = flag.String("bin", "", "server binary (default: go build ./functions/local)")
)

func main() {
	flag.Parse()
	work, err := os.MkdirTemp(*tmp, "clockwork-churn-")
	check(err)
	if !*keep {
		defer os.RemoveAll(work)
	}
	server := *bin
	if server == "" {
		server, err = toolserver.Build(work)
		check(err)
	}
	tokens, err := toolserver.Tokens(work, token, "churn")
	check(err)
	data := filepath.Join(work, "data")
	s, err := toolserver.Start(server, data, tokens, token, time.Minute, "-log-level", "warn", "-retain-expectations", *retain)
	check(err)
	defer s.Stop()
	check(s.Must("PUT", "/v1/agents/churn", toolserver.Card("churn")))

	fmt.Printf("clockwork churn: %d expectations at %d/s, raised then satisfied, -retain-expectations %s, %d workers; data %s\n\n", *n, *rate, *retain, *conc, data)
	fmt.Println("| elapsed | raised | satisfied | data file | on disk | RSS |")
	fmt.Println("|---|---|---|---|---|---|")
	var raised, satisfied atomic.Int64
	t0 := time.Now()
	sample := func() {
		fi, err := os.Stat(filepath.Join(data, "clockwork.db"))
		size, blocks := int64(0), int64(0)
		if err == nil {
			size = fi.Size()
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				blocks = st.Blocks * 512
			}
		}
		fmt.Printf("| %s | %d | %d | %.1f MB | %.1f MB | %s |\n", time.Since(t0).Round(time.Second), raised.Load(), satisfied.Load(),
			float64(size)/1e6, float64(blocks)/1e6, s.RSS())
	}
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		t := time.NewTicker(*every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				sample()
			}
		}
	}()

	// Batches of 50 are released at the rate asked for.
	batches := make(chan int)
	go func() {
		defer close(batches)
		interval := time.Duration(float64(time.Second) * 50 / float64(*rate))
		next := time.Now()
		for i := 0; i < *n; i += 50 {
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
			next = next.Add(interval)
			batches <- i
		}
	}()
	var wg sync.WaitGroup
	for range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range batches {
				var es, facts []any
				now := expect.FormatTime(time.Now())
				for j := i; j < min(i+50, *n); j++ {
					id := "c-" + strconv.Itoa(j)
					es = append(es, map[string]any{"expectationId": id, "kind": "payment", "subject": map[string]any{"type": "invoice", "id": id},
						"expects": "invoice is paid", "satisfiedBy": map[string]any{"factKey": "paid." + id},
						"dueAt": expect.FormatTime(time.Now().Add(time.Hour)), "basis": "contract"})
					facts = append(facts, map[string]any{"factKey": "paid." + id, "observedAt": now})
				}
				body, _ := json.Marshal(map[string]any{"taskId": "t", "contextId": "c", "expectations": es})
				check(s.Must("POST", "/v1/agents/churn/expectations", body))
				raised.Add(int64(len(es)))
				body, _ = json.Marshal(map[string]any{"facts": facts})
				check(s.Must("POST", "/v1/agents/churn/facts", body))
				satisfied.Add(int64(len(facts)))
			}
		}()
	}
	wg.Wait()
	churned := time.Since(t0)
	time.Sleep(*tail)
	close(stop)
	sampler.Wait()
	sample()
	fmt.Printf("\n%d raised and satisfied in %s (%.0f/s); then %s of expiry\n", *n, churned.Round(time.Second), float64(*n)/churned.Seconds(), *tail)
}

func check(err error) {
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "churn:", err)
	os.Exit(1)
}
