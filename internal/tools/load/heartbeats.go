package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentclock/clockwork/client"
	"github.com/agentclock/clockwork/internal/app"
	"github.com/agentclock/clockwork/internal/heartbeat"
)

var (
	heartbeats = flag.Int("heartbeats", 0, "with the lapse phase: also measure lapse latency while this many heartbeats (every PT1M) are pinged on schedule through the API (0: not)")
	hbWarm     = flag.Duration("heartbeats-warm", time.Minute, "how long the heartbeats are pinged before lapse latency is measured among them")
)

// heartbeatLoad puts n heartbeats every minute, pings each once, then
// pings every one of them once a minute, spread evenly, through the API
// until stop is closed. It returns when the first pings are done, with a
// function that stops the pinger and reports what it did.
func heartbeatLoad(ctx context.Context, r *runner, a *app.App, n int) (stop func() string) {
	t0 := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, *concurrency)
	var setupErrs atomic.Int64
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			name := fmt.Sprintf("hb-%d", i)
			if _, _, err := a.Watcher.PutHeartbeat(ctx, "load", name, heartbeat.Spec{Kind: "payment", Every: "PT1M"}); err != nil {
				setupErrs.Add(1)
				return
			}
			if _, err := a.Watcher.PingHeartbeat(ctx, "load", name, "load", heartbeat.Success); err != nil {
				setupErrs.Add(1)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("\n%d heartbeats (every PT1M) put and first pinged in %.1fs (%d errors)\n", n, time.Since(t0).Seconds(), setupErrs.Load())

	// The pinger: heartbeat i is pinged at offset i/n of each minute.
	done := make(chan struct{})
	var pings, errs atomic.Int64
	var latMu sync.Mutex
	var lat []time.Duration
	start := time.Now()
	var pw sync.WaitGroup
	workers := *concurrency
	for w := range workers {
		pw.Add(1)
		go func() {
			defer pw.Done()
			for round := 0; ; round++ {
				for i := w; i < n; i += workers {
					at := start.Add(time.Duration(round)*time.Minute + time.Duration(i)*time.Minute/time.Duration(n))
					select {
					case <-done:
						return
					case <-time.After(time.Until(at)):
					}
					s := time.Now()
					_, err := r.c.Ping(ctx, "load", fmt.Sprintf("hb-%d", i), client.PingSuccess)
					d := time.Since(s)
					pings.Add(1)
					if err != nil {
						errs.Add(1)
					}
					latMu.Lock()
					lat = append(lat, d)
					latMu.Unlock()
				}
			}
		}()
	}
	return func() string {
		close(done)
		pw.Wait()
		el := time.Since(start)
		// A heartbeat whose period lapsed was not pinged in time.
		lapsed := 0
		for i := range n {
			v, err := a.Watcher.GetHeartbeat(ctx, "load", fmt.Sprintf("hb-%d", i))
			if err == nil && v.Status == heartbeat.StatusDown {
				lapsed++
			}
		}
		latMu.Lock()
		defer latMu.Unlock()
		slices.Sort(lat)
		return fmt.Sprintf("heartbeats: %d pings in %.1fs (%.0f/s), %d errors, ping latency p50 %s p99 %s max %s; heartbeats down (a period lapsed): %d of %d",
			pings.Load(), el.Seconds(), float64(pings.Load())/el.Seconds(), errs.Load(), pct(lat, 50), pct(lat, 99), pct(lat, 100), lapsed, n)
	}
}

// lapseLatencyAmongHeartbeats measures lapse latency, then again while
// -heartbeats heartbeats are pinged on schedule, and prints both.
func lapseLatencyAmongHeartbeats(ctx context.Context, r *runner, a *app.App, lateMu *sync.Mutex, late *[]time.Duration, open int) {
	fmt.Printf("\nlapse latency before the heartbeats:")
	lapseLatency(ctx, r, a, lateMu, late, open)
	stop := heartbeatLoad(ctx, r, a, *heartbeats)
	fmt.Printf("pinging them on schedule for %s before measuring (load average %s)\n", *hbWarm, loadAverage())
	time.Sleep(*hbWarm)
	fmt.Printf("\nlapse latency among %d heartbeats pinged every minute (%d open periods):", *heartbeats, *heartbeats)
	// The lapses of this round get other ids: lapseLatency numbers them
	// from 0, and the first round's are final already.
	*lapsePrefix = "l2"
	lapseLatency(ctx, r, a, lateMu, late, open+*heartbeats)
	fmt.Println(stop())
}
