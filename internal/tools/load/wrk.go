package main

import (
	"bytes"
	_ "embed"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The throughput table's load generator is wrk (Debian's package, the
// generator issue 15 measured with) when it is installed: a C event loop
// that sends a request for about 30 µs of CPU on these cores, where the Go
// client takes about 70 µs, so the server keeps more of the 2 cores the
// two share. Without wrk (or with -generator go) the tool drives the
// phases through the public Go client, as before.

var generatorFlag = flag.String("generator", "auto", "load generator of the throughput table: wrk, go, or auto (wrk when it is on PATH, else go)")

//go:embed wrk.lua
var wrkScript []byte

// wrkResult is what one wrk run reports.
type wrkResult struct {
	stats
	errors int64
	// sent[t] is how many requests thread t generated: its requests are
	// numbered 1..sent[t] (see wrk.lua).
	sent []int64
}

// useWrk says whether the throughput table runs on wrk, and why not when
// it does not.
func useWrk() (bool, string) {
	switch *generatorFlag {
	case "go":
		return false, "-generator go"
	case "wrk", "auto":
		if _, err := exec.LookPath("wrk"); err != nil {
			if *generatorFlag == "wrk" {
				fail(fmt.Errorf("-generator wrk: %w (apt-get install wrk)", err))
			}
			return false, "wrk is not installed (apt-get install wrk)"
		}
		return true, ""
	}
	fail(fmt.Errorf("-generator %q: want wrk, go or auto", *generatorFlag))
	return false, ""
}

// wrkThreads is wrk's thread count: one per core, at most one per connection.
func wrkThreads() int { return max(1, min(runtime.NumCPU(), *concurrency)) }

// wrkPhase runs op against url with wrk (see runWrk) and prints the
// phase's line as the Go generator does.
func wrkPhase(url, name, op, due string, plans int) wrkResult {
	res, err := runWrk(url, op, due, plans, *duration)
	if err != nil {
		fail(err)
	}
	printPhase(name, res.stats, res.errors)
	return res
}

// runWrk runs op (raise, fact or event; see wrk.lua) against url with wrk
// for d (whole seconds, at least one) from -c connections; plans is the
// number of plans each thread appends events to. It returns an error when
// wrk cannot be run or does not report.
func runWrk(url, op, due string, plans int, d time.Duration) (wrkResult, error) {
	script := filepath.Join(os.TempDir(), fmt.Sprintf("clockwork-load-%d.lua", os.Getpid()))
	if err := os.WriteFile(script, wrkScript, 0o600); err != nil {
		return wrkResult{}, err
	}
	defer os.Remove(script)
	secs := max(1, int(d.Round(time.Second).Seconds()))
	threads := wrkThreads()
	cmd := exec.Command("wrk", "-t", strconv.Itoa(threads), "-c", strconv.Itoa(*concurrency),
		"-d", fmt.Sprintf("%ds", secs), "--latency", "-s", script,
		url, "--", op, strconv.Itoa(threads), due, strconv.Itoa(max(1, plans)))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %w\n%s", err, out.String())
	}
	res, err := parseWrk(out.String(), threads)
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %w\n%s", err, out.String())
	}
	res.rate = float64(res.n) / float64(secs)
	return res, nil
}

// parseWrk reads the line wrk.lua's done() prints: requests, transport
// errors, answers with a status of 400 or more, latency p50, p99 and max in
// microseconds, and each thread's count of generated requests.
func parseWrk(out string, threads int) (wrkResult, error) {
	var line string
	for l := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(l, "CLOCKWORK_WRK "); ok {
			line = strings.TrimSpace(rest)
		}
	}
	f := strings.Fields(line)
	if len(f) != 7 {
		return wrkResult{}, fmt.Errorf("no CLOCKWORK_WRK line of 7 fields in its output")
	}
	var v [6]int64
	for i := range v {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || n < 0 {
			return wrkResult{}, fmt.Errorf("field %d of %q: not a count", i+1, line)
		}
		v[i] = n
	}
	var sent []int64
	for s := range strings.SplitSeq(f[6], ",") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return wrkResult{}, fmt.Errorf("sent counts %q: not counts", f[6])
		}
		sent = append(sent, n)
	}
	if len(sent) != threads {
		return wrkResult{}, fmt.Errorf("%d sent counts for %d threads", len(sent), threads)
	}
	us := func(n int64) time.Duration { return (time.Duration(n) * time.Microsecond).Round(10 * time.Microsecond) }
	return wrkResult{stats: stats{n: int(v[0]), p50: us(v[3]), p99: us(v[4]), max: us(v[5])}, errors: v[1] + v[2], sent: sent}, nil
}

// wrkRows runs the table's phases with wrk. Thread t of wrk raises
// r<t>-1, r<t>-2, ... and reports the facts that satisfy them in the same
// order (wrk.lua); the pool that makes every fact of the fact phase find an
// open expectation is raised in bulk into each thread's numbering, up to
// four times what the thread raised, at most as many as it sent the
// ceiling.
func wrkRows(ceiling, cw *child, rw *runner, measure measureFunc, farDue string, plans int) []throughputRow {
	threads := wrkThreads()
	phase := func(c *child, name, op string, res *wrkResult) func() stats {
		return func() stats {
			*res = wrkPhase(c.url, name, op, farDue, plans/threads)
			return res.stats
		}
	}
	var rows []throughputRow
	raised := make([]int64, threads)
	if wantOp("raise") {
		var cres, res wrkResult
		row := throughputRow{name: "raise (1 expectation)"}
		row.ceiling = measure(ceiling, phase(ceiling, "ceiling, raise body", "raise", &cres))
		row.clockwork = measure(cw, phase(cw, "raise (1 expectation per request)", "raise", &res))
		raised = res.sent
		rows = append(rows, row)
	}
	if wantOp("fact") {
		var cres, res wrkResult
		row := throughputRow{name: "fact (satisfies 1)"}
		row.ceiling = measure(ceiling, phase(ceiling, "ceiling, fact body", "fact", &cres))
		pool := make([]int64, threads)
		for t := range threads {
			want := cres.sent[t]
			if raised[t] > 0 {
				want = min(want, 4*raised[t])
			}
			if want > raised[t] {
				raiseRange(rw, fmt.Sprintf("r%d", t), raised[t]+1, want+1, farDue)
			}
			pool[t] = max(want, raised[t])
		}
		cw.waitFeed()
		row.clockwork = measure(cw, phase(cw, "fact (satisfies 1 expectation)", "fact", &res))
		rows = append(rows, row)
		var beyond, sent int64
		for t := range threads {
			beyond += max(0, res.sent[t]-pool[t])
			sent += res.sent[t]
		}
		if beyond > 0 {
			fmt.Printf("  (%d of the %d facts matched nothing: more facts than open expectations)\n", beyond, sent)
		}
	}
	if wantOp("event") {
		var cres, res wrkResult
		row := throughputRow{name: "execution event"}
		row.ceiling = measure(ceiling, phase(ceiling, "ceiling, event body", "event", &cres))
		row.clockwork = measure(cw, phase(cw, "execution event (TOOL_REQUEST)", "event", &res))
		rows = append(rows, row)
	}
	return rows
}
