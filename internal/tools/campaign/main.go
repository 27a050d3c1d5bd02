// Command campaign runs the kill -9 fault campaign against the embedded
// server (functions/local) and prints its figures: it kills the real server
// with SIGKILL again and again under a concurrent load of raises, facts and
// withdrawals, and after the last restart checks that every expectation is
// in exactly the state its acknowledged operations and its instants imply,
// that every lapse reached a real A2A agent (a2atest, A2A 1.0), and that the
// agent never saw two different messageIds for one lapse.
//
//	go run ./internal/tools/campaign                 # >= 50 rounds and >= 100,000 operations
//	go run ./internal/tools/campaign -short          # 5 rounds, ~3,000 operations (CI)
//	go run ./internal/tools/campaign -rounds 80 -workers 32 -seed 7 -data /tmp/cw
//	go run ./internal/tools/campaign -no-kill -rounds 40 -min-ops 8000   # baseline without crashes
//	go run ./internal/tools/campaign -all            # the full campaign above, then the -aws one below, then a summary of both
//	go run ./internal/tools/campaign -aws            # AWS mode on moto: >= 50 rounds, >= 1,000 operations, 4 workers
//	go run ./internal/tools/campaign -aws -short     # AWS mode, CI form: 3 rounds, ~200 operations
//
// With -aws it starts the moto emulator once (dynamotest.StartMain) and
// runs the server with -aws-endpoint, a table and a schedule group of its
// own instead of -data: the server then polls the table's stream and fires
// due schedules itself, so each kill -9 also kills the stream poller and the
// clock between a commit and its delivery. After each restart the stream
// poller resumes from its checkpoint (kept under the work directory, as the
// event source mapping keeps its own), so what it had read but not finished
// when it was killed is processed again; the checks are the same and
// require that replay to be harmless.
//
// It builds functions/local once, starts it with -data and -tokens, and
// each round runs -workers concurrent clients for a random 0.5-2 s, then
// sends SIGKILL with requests in flight and restarts the server on the same
// data. Rounds are added until both -rounds and -min-ops are reached (with
// -short, or -budget, no round beyond -rounds starts once the budget is
// spent).
//
// An operation is one HTTP request (a raise of 1-10 expectations, a report
// of 1-5 facts, a withdrawal of 1-3 expectations). An operation answered 2xx
// is acknowledged, that is committed; one answered 409 (a withdrawal racing
// a lapse or a fact) is refused and committed nothing; one that got no
// answer because the server was killed is unknown: the checker accepts both
// of its outcomes, and nothing else. Any other answer is a violation.
//
// It exits 0 when there is no violation, 1 naming each violation, 2 when
// the campaign itself could not run. Traffic goes only to 127.0.0.1: the
// server it starts and the agent it runs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
)

func main() {
	var cfg Config
	flag.IntVar(&cfg.Rounds, "rounds", 0, "minimum number of kill -9 rounds (0: the form's default, see Config)")
	flag.IntVar(&cfg.Workers, "workers", 0, "concurrent client workers during each round (0: 16; -aws: 4)")
	flag.IntVar(&cfg.MinOps, "min-ops", 0, "keep adding rounds until at least this many operations were acknowledged (0: the form's default)")
	flag.Int64Var(&cfg.Seed, "seed", 0, "random seed (0: from the clock)")
	flag.StringVar(&cfg.Data, "data", "", "data directory of the server (default: a temporary one, removed unless a violation is found)")
	flag.BoolVar(&cfg.Short, "short", false, "the CI form: 5 rounds, ~3,000 operations")
	flag.DurationVar(&cfg.Budget, "budget", 0, "once -rounds are done, start no new round after this much campaign time even if -min-ops is not reached (0: the form's default: no bound; -short: 40s)")
	flag.DurationVar(&cfg.Settle, "settle", 15*time.Minute, "bound on the wait for every instant and lapse to be processed after the last restart")
	flag.BoolVar(&cfg.NoKill, "no-kill", false, "baseline: the same rounds, load and checks without killing the server")
	all := flag.Bool("all", false, "run both full campaigns, the embedded one and then the AWS mode on moto (each with its defaults; -seed applies to both), and print a summary of the two")
	flag.BoolVar(&cfg.NoFaults, "no-faults", false, "AWS mode without fault injection (by default: GSIs 2 s behind, 2% throttled calls, 2% conflicting transactions, stream records out of order, duplicated and cut off)")
	flag.IntVar(&cfg.AgentFailEvery, "agent-fail-every", 3, "the agent answers every n-th lapse task with 503, so deliveries are retried across the kills (0: never)")
	flag.BoolVar(&cfg.AWS, "aws", false, "AWS mode: run the server against the moto emulator (-aws-endpoint, own table and schedule group) instead of -data; defaults 50 rounds, 4 workers, 1,000 operations, 15m budget (-short: 3 rounds, ~200 operations, 25s budget)")
	flag.Parse()
	if *all {
		os.Exit(runAll(cfg.Seed, cfg.Settle))
	}
	res, err := Run(context.Background(), cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign:", err)
		os.Exit(2)
	}
	if len(res.Violations) > 0 {
		os.Exit(1)
	}
}

// Config is the campaign's configuration. Zero Workers, Rounds, MinOps and
// Budget take the defaults of the form (formDefaults): 16 workers, 50
// rounds, 100,000 operations and no budget, or 5 rounds, 3,000 operations
// and 40s with Short; with AWS 4 workers, 50 rounds, 1,000 operations and
// 15m (3 rounds, 200 operations and 25s with Short).
type Config struct {
	Rounds  int
	Workers int
	MinOps  int
	Seed    int64
	Data    string
	Short   bool
	Settle  time.Duration
	// Budget bounds the time spent adding rounds beyond Rounds to reach
	// MinOps (0: the form's default; the full embedded form has none).
	Budget time.Duration
	// NoKill ends rounds without killing the server: a baseline to
	// compare with (same load, same checks, no crash).
	NoKill bool
	// Bin is a prebuilt functions/local binary; empty builds it.
	Bin string
	// AWS runs the server in its AWS mode against the moto emulator
	// (dynamotest.StartMain), on a table and schedule group of its own,
	// instead of on a data directory.
	AWS bool
	// Endpoint is the emulator to use with AWS; empty starts it.
	Endpoint string
	// NoFaults runs the AWS form without the faults AWS has and moto does
	// not (by default the emulator's GSIs lag 2 s, 2% of calls are
	// throttled and 2% of transactions conflict, and the server's stream
	// poller delivers out of order, twice and cut off, and the emulated
	// Scheduler fires early, late, twice or never: dynamotest.DefaultFaults,
	// -aws-stream-faults and -scheduler-faults).
	NoFaults bool
	// AgentFailEvery makes the agent answer every n-th lapse task with
	// 503 (0: never), so that deliveries are retried, and their retries
	// (and the agent's circuit) span the kills.
	AgentFailEvery int
}

// Result holds the campaign's figures.
type Result struct {
	Rounds                  int
	Acked, Unknown, Refused int64
	Raises, FactReports     int64
	WithdrawalRequests      int64
	Expectations            int // records checked
	ExpectationsRaised      int // expectations sent in raises
	Facts                   int // acknowledged facts checked
	Withdrawals             int // acknowledged withdrawals (ids) checked
	Lapses                  int // lapsed records checked
	Satisfied, Withdrawn    int // final states
	Late                    int // lapsed records satisfied afterwards
	AgentMessages           int
	Redelivered             int // receipts of a messageId already received
	Lost                    int
	Duplicated              int
	// Faults counts the emulator's injected faults (AWS form with faults).
	Faults                   *dynamotest.FaultCounts
	LoadTime, WallTime       time.Duration
	OpsPerSec, WallOpsPerSec float64
	MaxRestart, SumRestart   time.Duration
	Violations               []Violation
}

// Violation is one broken property, by category.
type Violation struct {
	Kind   string
	Detail string
}

const (
	agentVersion = "1.0"
	token        = "cw_campaign_token_0123456789abcdef"
)

// ---------------------------------------------------------------------------
// What the client knows: every operation it sent and what came back.

type outcome int

const (
	unknown  outcome = iota // no answer: may or may not have committed
	acked                   // 2xx: committed
	rejected                // answered 4xx: committed nothing
)

type op struct {
	round      int
	sent, done time.Time
	status     int
	out        outcome
}

// factSent is one fact of a fact report.
type factSent struct {
	op         *op
	key        string
	observedAt string
	// claimed: the acknowledged answer listed the expectation among what
	// this fact satisfied.
	claimed bool
}

type withdrawSent struct {
	op *op
}

type exp struct {
	id         string
	body       expect.Expectation
	raise      *op
	facts      []*factSent
	withdraws  []*withdrawSent
	successors []string // expectations whose "after" names this one
	dependents []string // expectations anchored on this one
}

type campaign struct {
	cfg  Config
	out  io.Writer
	tag  string
	agID string

	mu         sync.Mutex
	exps       map[string]*exp
	order      []string // every id sent, in order
	raised     []string // ids whose raise was acknowledged, in order
	noise      []*factSent
	violations []Violation
	batchSeq   int64

	// per-round counters
	acked, unknownN, refused atomic.Int64
	latMu                    sync.Mutex
	lat                      []time.Duration // acknowledged operations of the round
	raises, facts, withdraws atomic.Int64

	srv *server
}

func (c *campaign) violate(kind, format string, args ...any) {
	c.mu.Lock()
	c.violations = append(c.violations, Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	c.mu.Unlock()
}

// ---------------------------------------------------------------------------

// runAll runs the embedded campaign and then the AWS one, each with its
// defaults, and prints both results side by side. It returns the exit code:
// 0, 1 for violations, 2 when a campaign could not run.
func runAll(seed int64, settle time.Duration) int {
	embedded := Config{Seed: seed, Settle: settle}
	aws := Config{AWS: true, Seed: seed, Settle: settle}
	type run struct {
		name string
		cfg  Config
		res  *Result
	}
	runs := []*run{{name: "embedded (-data)", cfg: embedded}, {name: "AWS mode on moto", cfg: aws}}
	code := 0
	for _, r := range runs {
		fmt.Printf("\n######## %s ########\n", r.name)
		res, err := Run(context.Background(), r.cfg, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "campaign:", err)
			return 2
		}
		r.res = res
		if len(res.Violations) > 0 {
			code = 1
		}
	}
	fmt.Printf("\n######## summary ########\n")
	fmt.Printf("%-18s %7s %10s %12s %9s %7s %5s %11s %11s\n", "campaign", "rounds", "acked ops", "expectations", "lapses", "ops/s", "lost", "duplicated", "violations")
	for _, r := range runs {
		fmt.Printf("%-18s %7d %10d %12d %9d %7.0f %5d %11d %11d\n", r.name, r.res.Rounds, r.res.Acked, r.res.Expectations,
			r.res.Lapses, r.res.OpsPerSec, r.res.Lost, r.res.Duplicated, len(r.res.Violations))
	}
	return code
}

// campaignFaults are the emulator's faults in the AWS form: the tests'
// (dynamotest.DefaultFaults) and a fifth of Scheduler's writes throttled.
var campaignFaults = func() dynamotest.Faults {
	f := dynamotest.DefaultFaults
	f.SchedulerThrottle = 0.2
	return f
}()

// formDefaults are the settings a zero Config field takes in each form of
// the campaign, by {AWS, Short}. moto answers only about 20 operations per
// second, and is slower as its table grows, so the AWS forms are bounded by
// time as much as by operations.
var formDefaults = map[[2]bool]struct {
	workers, rounds, minOps int
	budget                  time.Duration
}{
	{false, false}: {workers: 16, rounds: 50, minOps: 100000},
	{false, true}:  {workers: 16, rounds: 5, minOps: 3000, budget: 40 * time.Second},
	{true, false}:  {workers: 4, rounds: 50, minOps: 1000, budget: 15 * time.Minute},
	{true, true}:   {workers: 4, rounds: 3, minOps: 200, budget: 25 * time.Second},
}

// Run runs the campaign and prints its figures to out. It returns an error
// only when the campaign could not run; violations are in the result.
func Run(ctx context.Context, cfg Config, out io.Writer) (*Result, error) {
	def := formDefaults[[2]bool{cfg.AWS, cfg.Short}]
	if cfg.Workers <= 0 {
		cfg.Workers = def.workers
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = def.rounds
	}
	if cfg.MinOps <= 0 {
		cfg.MinOps = def.minOps
	}
	if cfg.Budget <= 0 {
		cfg.Budget = def.budget
	}
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano()
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 15 * time.Minute
	}
	work, err := os.MkdirTemp("", "clockwork-campaign-")
	if err != nil {
		return nil, err
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(work)
		}
	}()
	data := cfg.Data
	if data == "" {
		data = filepath.Join(work, "data")
	}
	be := backend{data: data}
	var faultsOff func() *dynamotest.FaultCounts
	if cfg.AWS {
		ep := cfg.Endpoint
		if ep == "" {
			fmt.Fprintf(out, "starting the DynamoDB emulator (moto) ... ")
			start := time.Now()
			var stop func()
			ep, stop, err = dynamotest.StartMain()
			if err != nil {
				fmt.Fprintln(out)
				return nil, fmt.Errorf("%w: %w", ErrNoEmulator, err)
			}
			defer stop()
			fmt.Fprintf(out, "%s at %s\n", time.Since(start).Round(time.Millisecond), ep)
		}
		if u, err := url.Parse(ep); err != nil || u.Hostname() != "127.0.0.1" {
			return nil, fmt.Errorf("the emulator is at %q, not on 127.0.0.1", ep)
		}
		uniq := fmt.Sprintf("%x-%x", uint32(cfg.Seed), uint32(time.Now().UnixNano()))
		be = backend{endpoint: ep, table: "campaign-" + uniq, group: "campaign-" + uniq, data: data, faults: !cfg.NoFaults}
		if !cfg.NoFaults {
			before, err := dynamotest.PostFaults(ep, campaignFaults)
			if err != nil {
				return nil, err
			}
			faultsOff = func() *dynamotest.FaultCounts {
				after, err := dynamotest.PostFaults(ep, dynamotest.Faults{})
				if err != nil {
					return nil
				}
				return &dynamotest.FaultCounts{Throttled: after.Throttled - before.Throttled,
					Conflicts: after.Conflicts - before.Conflicts, HiddenFromIndex: after.HiddenFromIndex - before.HiddenFromIndex,
					TxThrottled: after.TxThrottled - before.TxThrottled, SchedulerThrottled: after.SchedulerThrottled - before.SchedulerThrottled}
			}
			defer func() { _ = faultsOff() }() // on every path; counted below on success
			fmt.Fprintf(out, "faults on: GSIs %s behind, %.0f%% of calls throttled, %.0f%% of transactions conflicting, %.0f%% cancelled for throttling, %.0f%% of Scheduler writes throttled; stream records out of order, duplicated and cut off\n",
				campaignFaults.GSILag, 100*campaignFaults.Throttle, 100*campaignFaults.TransactionConflict, 100*campaignFaults.TransactionThrottle, 100*campaignFaults.SchedulerThrottle)
		}
		data = be.String()
	}
	bin := cfg.Bin
	if bin == "" {
		fmt.Fprintf(out, "building functions/local ... ")
		start := time.Now()
		if bin, err = BuildServer(work); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "%s\n", time.Since(start).Round(time.Millisecond))
	}
	tokens := filepath.Join(work, "tokens.json")
	tf, _ := json.Marshal(map[string]any{"tokens": []any{map[string]any{
		"token": token, "principal": "campaign", "agents": []string{"*"},
		"scopes": []string{"agents:write", "expectations:write", "facts:write", "read"},
	}}})
	if err := os.WriteFile(tokens, tf, 0o600); err != nil {
		return nil, err
	}
	logPath := filepath.Join(work, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()

	c := &campaign{cfg: cfg, out: out, exps: map[string]*exp{}}
	c.tag = fmt.Sprintf("%x", uint32(cfg.Seed)^uint32(time.Now().UnixNano()))
	c.agID = "campaign-" + c.tag
	tb := &agentTB{c: c}
	defer tb.close()
	agent := a2atest.NewAgent(tb, agentVersion)
	agent.FailEvery(cfg.AgentFailEvery, 503)

	fmt.Fprintf(out, "clockwork kill -9 campaign: seed %d, %d workers, at least %d rounds and %d acknowledged operations\n", cfg.Seed, cfg.Workers, cfg.Rounds, cfg.MinOps)
	if cfg.AWS {
		fmt.Fprintf(out, "AWS mode: %s, server log %s, A2A %s agent at %s\n", be, logPath, agentVersion, agent.URL())
	} else {
		fmt.Fprintf(out, "server data in %s, server log %s, A2A %s agent at %s\n", data, logPath, agentVersion, agent.URL())
	}

	c.srv, err = startServer(bin, be, tokens, logFile)
	if err != nil {
		return nil, err
	}
	defer func() {
		if c.srv != nil {
			c.srv.kill9()
		}
	}()
	if code, b := c.srv.call("PUT", "/v1/agents/"+c.agID, agent.Card()); code != 200 {
		return nil, fmt.Errorf("registering the agent's card: %d %s", code, b)
	}

	res := &Result{}
	rng := rand.New(rand.NewSource(cfg.Seed))
	wallStart := time.Now()
	var total int64
	for round := 1; round <= cfg.Rounds || total < int64(cfg.MinOps); round++ {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if round > cfg.Rounds && cfg.Budget > 0 && time.Since(wallStart) > cfg.Budget {
			fmt.Fprintf(out, "time budget %s spent: stopping at %d acknowledged operations, short of %d\n", cfg.Budget, total, cfg.MinOps)
			break
		}
		loadFor := 500*time.Millisecond + time.Duration(rng.Int63n(int64(1500*time.Millisecond)))
		c.acked.Store(0)
		c.unknownN.Store(0)
		c.refused.Store(0)
		c.lat = c.lat[:0]
		var stop atomic.Bool
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < cfg.Workers; w++ {
			wg.Add(1)
			wrng := rand.New(rand.NewSource(cfg.Seed + int64(round)*1000 + int64(w)))
			go func() {
				defer wg.Done()
				c.worker(round, wrng, &stop)
			}()
		}
		time.Sleep(loadFor)
		// kill -9 at this random moment, with requests in flight.
		stop.Store(true)
		killAt := time.Now()
		loaded := killAt.Sub(start)
		var restart time.Duration
		if cfg.NoKill {
			wg.Wait()
		} else {
			c.srv.kill9()
			wg.Wait()
			srv, err := startServer(bin, be, tokens, logFile)
			if err != nil {
				c.srv = nil
				keep = true
				return nil, fmt.Errorf("round %d: restart after kill -9: %w (log %s, data %s)", round, err, logPath, data)
			}
			restart = time.Since(killAt)
			c.srv = srv
		}
		a, u, r := c.acked.Load(), c.unknownN.Load(), c.refused.Load()
		total += a
		res.Acked += a
		res.Unknown += u
		res.Refused += r
		res.LoadTime += loaded
		res.SumRestart += restart
		res.MaxRestart = max(res.MaxRestart, restart)
		res.Rounds = round
		slices.Sort(c.lat)
		fmt.Fprintf(out, "round %3d: load %5.2fs  acked %6d  unknown %3d  refused %4d  %6.0f ops/s  latency p50 %4dms p99 %5dms  restart %5dms  (total acked %d)\n",
			round, loaded.Seconds(), a, u, r, float64(a)/loaded.Seconds(), pct(c.lat, 0.5).Milliseconds(), pct(c.lat, 0.99).Milliseconds(), restart.Milliseconds(), total)
	}
	res.WallTime = time.Since(wallStart)
	res.Raises, res.FactReports, res.WithdrawalRequests = c.raises.Load(), c.facts.Load(), c.withdraws.Load()
	res.OpsPerSec = float64(res.Acked) / res.LoadTime.Seconds()
	res.WallOpsPerSec = float64(res.Acked) / res.WallTime.Seconds()

	fmt.Fprintf(out, "settling: waiting for every instant to be processed and every lapse delivered ...\n")
	recs, err := c.settle(ctx, cfg.Settle)
	if err != nil {
		keep = true
		return nil, err
	}
	c.check(recs, agent.Received(), res)
	res.Violations = c.violations
	if faultsOff != nil {
		res.Faults = faultsOff()
	}
	c.report(res)
	if len(res.Violations) > 0 {
		keep = true
		fmt.Fprintf(out, "kept for inspection: %s (server log %s, data %s)\n", work, logPath, data)
	}
	return res, nil
}

// ErrNoEmulator wraps the reason the AWS mode could not start the emulator.
var ErrNoEmulator = errors.New("DynamoDB emulator unavailable")

// BuildServer builds functions/local into dir and returns the binary.
func BuildServer(dir string) (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	bin := filepath.Join(dir, "local")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/agentclock/clockwork/functions/local")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build functions/local: %v\n%s", err, out)
	}
	return bin, nil
}
