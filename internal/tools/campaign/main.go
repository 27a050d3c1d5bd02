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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
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
// The server process.

type server struct {
	cmd    *exec.Cmd
	url    string
	client *http.Client
}

// backend is where the server keeps its state: a data directory, or (AWS
// mode) a table and schedule group on the emulator at endpoint.
type backend struct {
	faults                 bool // the server's stream poller injects faults
	data                   string
	endpoint, table, group string
}

func (b backend) args() []string {
	if b.endpoint != "" {
		// -data holds the stream poller's checkpoint in the AWS mode.
		args := []string{"-aws-endpoint", b.endpoint, "-table", b.table, "-schedule-group", b.group, "-data", b.data}
		if b.faults {
			// The stream poller's faults, and Scheduler's minute scaled
			// to 2 s with the emulated Scheduler firing early, late,
			// twice or never (the sweep catches those).
			args = append(args, "-aws-stream-faults", "-scheduler-precision", "2s", "-scheduler-faults")
		}
		return args
	}
	return []string{"-data", b.data}
}

func (b backend) String() string {
	if b.endpoint != "" {
		return fmt.Sprintf("table %s, schedule group %s on %s", b.table, b.group, b.endpoint)
	}
	return "data " + b.data
}

func startServer(bin string, be backend, tokens string, log io.Writer) (*server, error) {
	args := append([]string{"-addr", "127.0.0.1:0"}, be.args()...)
	args = append(args, "-tokens", tokens, "-log-level", "warn")
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd}
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "clockwork listening on "); ok {
			s.url = strings.Fields(rest)[0]
			break
		}
	}
	if s.url == "" {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, errors.New("the server did not print where it listens (see its log)")
	}
	if u, err := url.Parse(s.url); err != nil || !strings.HasPrefix(u.Host, "127.0.0.1:") {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("the server listens on %q, not on 127.0.0.1", s.url)
	}
	go io.Copy(io.Discard, stdout)
	s.client = &http.Client{
		Timeout:   60 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256, DisableCompression: true},
	}
	return s, nil
}

func (s *server) kill9() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
	s.client.CloseIdleConnections()
}

// call sends one request; status 0 means no (complete) answer.
func (s *server) call(method, path string, body []byte) (int, []byte) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := s.client.Do(req)
	if err != nil {
		return 0, nil
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil
	}
	return res.StatusCode, b
}

// ---------------------------------------------------------------------------
// testing.TB for a2atest outside a test.

type agentTB struct {
	testing.TB // nil: only the methods below are called
	c          *campaign
	mu         sync.Mutex
	cleanups   []func()
}

func (t *agentTB) Helper()             {}
func (t *agentTB) Name() string        { return "campaign" }
func (t *agentTB) Cleanup(f func())    { t.mu.Lock(); t.cleanups = append(t.cleanups, f); t.mu.Unlock() }
func (t *agentTB) Logf(string, ...any) {}
func (t *agentTB) Log(...any)          {}
func (t *agentTB) Errorf(format string, args ...any) {
	t.c.violate("agent", format, args...)
}
func (t *agentTB) Error(args ...any) { t.c.violate("agent", "%s", fmt.Sprint(args...)) }
func (t *agentTB) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("a2atest: "+format, args...))
}
func (t *agentTB) Fatal(args ...any) { panic(fmt.Sprint(args...)) }
func (t *agentTB) Failed() bool      { return false }
func (t *agentTB) close() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
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
			before, err := dynamotest.PostFaults(ep, dynamotest.DefaultFaults)
			if err != nil {
				return nil, err
			}
			faultsOff = func() *dynamotest.FaultCounts {
				after, err := dynamotest.PostFaults(ep, dynamotest.Faults{})
				if err != nil {
					return nil
				}
				return &dynamotest.FaultCounts{Throttled: after.Throttled - before.Throttled,
					Conflicts: after.Conflicts - before.Conflicts, HiddenFromIndex: after.HiddenFromIndex - before.HiddenFromIndex}
			}
			defer func() { _ = faultsOff() }() // on every path; counted below on success
			fmt.Fprintf(out, "faults on: GSIs %s behind, %.0f%% of calls throttled, %.0f%% of transactions conflicting; stream records out of order, duplicated and cut off\n",
				dynamotest.DefaultFaults.GSILag, 100*dynamotest.DefaultFaults.Throttle, 100*dynamotest.DefaultFaults.TransactionConflict)
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

// ---------------------------------------------------------------------------
// Load.

var graces = []string{"PT0.5S", "PT1S", "PT2S"}
var offsets = []string{"PT0.2S", "PT0.5S", "PT1S", "PT2S"}

func (c *campaign) worker(round int, rng *rand.Rand, stop *atomic.Bool) {
	for !stop.Load() {
		p := rng.Float64()
		switch {
		case p < 0.40:
			c.raise(round, rng)
		case p < 0.82:
			if !c.fact(round, rng) {
				c.raise(round, rng)
			}
		default:
			if !c.withdraw(round, rng) {
				c.raise(round, rng)
			}
		}
	}
}

// finish records an answer; it returns whether it was acknowledged.
func (c *campaign) finish(o *op, status int) {
	c.mu.Lock()
	o.done = time.Now()
	o.status = status
	switch {
	case status >= 200 && status < 300:
		o.out = acked
	case status == 0 || status >= 500:
		o.out = unknown
	default:
		o.out = rejected
	}
	c.mu.Unlock()
	switch o.out {
	case acked:
		c.acked.Add(1)
		c.latMu.Lock()
		c.lat = append(c.lat, o.done.Sub(o.sent))
		c.latMu.Unlock()
	case unknown:
		c.unknownN.Add(1)
	default:
		c.refused.Add(1)
	}
}

func (c *campaign) raise(round int, rng *rand.Rand) {
	c.mu.Lock()
	c.batchSeq++
	b := c.batchSeq
	c.mu.Unlock()
	n := 1 + rng.Intn(10)
	subject := fmt.Sprintf("inv-%s-%d", c.tag, b)
	now := time.Now()
	body := make([]expect.Expectation, n)
	for i := range body {
		id := fmt.Sprintf("%s-%d-%d", c.tag, b, i)
		e := expect.Expectation{
			ExpectationID: id, Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: subject},
			Expects: "invoice is paid", SatisfiedBy: expect.SatisfiedBy{FactKey: "paid." + id},
			DueAt: expect.FormatTime(now.Add(time.Duration(rng.Int63n(int64(3 * time.Second)))).Truncate(time.Millisecond)),
			Basis: "contract",
		}
		if rng.Float64() < 0.3 {
			e.Grace = graces[rng.Intn(len(graces))]
		}
		if i > 0 && rng.Float64() < 0.3 {
			e.After = []string{body[rng.Intn(i)].ExpectationID}
			if i > 1 && rng.Float64() < 0.3 {
				if other := body[rng.Intn(i)].ExpectationID; other != e.After[0] {
					e.After = append(e.After, other)
				}
			}
		}
		if i > 0 && rng.Float64() < 0.2 {
			e.Anchor = &expect.Anchor{ExpectationID: body[rng.Intn(i)].ExpectationID, Offset: offsets[rng.Intn(len(offsets))]}
		}
		body[i] = e
	}
	o := &op{round: round, sent: time.Now()}
	c.mu.Lock()
	for _, e := range body {
		c.exps[e.ExpectationID] = &exp{id: e.ExpectationID, body: e, raise: o}
		c.order = append(c.order, e.ExpectationID)
		for _, a := range e.After {
			c.exps[a].successors = append(c.exps[a].successors, e.ExpectationID)
		}
		if e.Anchor != nil {
			c.exps[e.Anchor.ExpectationID].dependents = append(c.exps[e.Anchor.ExpectationID].dependents, e.ExpectationID)
		}
	}
	c.mu.Unlock()
	c.raises.Add(1)
	raw, _ := json.Marshal(expect.RaiseRequest{TaskID: "task-" + subject, ContextID: "ctx-" + c.tag, Expectations: body})
	status, resp := c.srv.call("POST", "/v1/agents/"+c.agID+"/expectations", raw)
	if status >= 200 && status < 300 {
		var out struct{ Records []*expect.Record }
		if err := json.Unmarshal(resp, &out); err != nil {
			c.violate("bad answer", "raise answered %d with an unreadable body: %v", status, err)
			status = 0
		} else {
			if len(out.Records) != n {
				c.violate("bad answer", "raise of %d expectations answered %d records", n, len(out.Records))
			}
			for i, r := range out.Records {
				if i >= n {
					break
				}
				e := body[i]
				switch {
				case r.Expectation.ExpectationID != e.ExpectationID:
					c.violate("bad answer", "raise answered record %d as %s, want %s", i, r.Expectation.ExpectationID, e.ExpectationID)
				case r.State != expect.StateOpen || r.DueAt != e.DueAt || !sameBody(r.Expectation, e):
					c.violate("bad answer", "raise of %s answered state %s dueAt %s (sent dueAt %s): a fresh expectation is open on its own dueAt", e.ExpectationID, r.State, r.DueAt, e.DueAt)
				}
			}
		}
	} else if status != 0 {
		c.violate("unexpected status", "raise of %s answered %d: %s", body[0].ExpectationID, status, trim(resp))
	}
	c.finish(o, status)
	if o.out == acked {
		c.mu.Lock()
		for _, e := range body {
			c.raised = append(c.raised, e.ExpectationID)
		}
		c.mu.Unlock()
	}
}

// pick returns a random acknowledged expectation: mostly a recent one, at
// times an old one (likely lapsed already).
func (c *campaign) pickLocked(rng *rand.Rand, window int, oldShare float64) *exp {
	n := len(c.raised)
	if n == 0 {
		return nil
	}
	var i int
	if rng.Float64() < oldShare {
		i = rng.Intn(n)
	} else {
		i = n - 1 - rng.Intn(min(window, n))
	}
	return c.exps[c.raised[i]]
}

func (c *campaign) fact(round int, rng *rand.Rand) bool {
	k := 1 + rng.Intn(5)
	o := &op{round: round}
	var facts []*factSent
	var owners []*exp // nil for a key that matches nothing
	c.mu.Lock()
	if len(c.raised) == 0 {
		c.mu.Unlock()
		return false
	}
	for i := 0; i < k; i++ {
		observed := expect.FormatTime(time.Now().Add(-time.Duration(rng.Int63n(int64(300 * time.Millisecond)))).Truncate(time.Microsecond))
		if rng.Float64() < 0.05 {
			f := &factSent{op: o, key: fmt.Sprintf("nothing.%s.%d", c.tag, rng.Int63()), observedAt: observed}
			c.noise = append(c.noise, f)
			facts, owners = append(facts, f), append(owners, nil)
			continue
		}
		e := c.pickLocked(rng, 3000, 0.2)
		f := &factSent{op: o, key: e.body.SatisfiedBy.FactKey, observedAt: observed}
		e.facts = append(e.facts, f)
		facts, owners = append(facts, f), append(owners, e)
	}
	o.sent = time.Now()
	c.mu.Unlock()
	c.facts.Add(1)
	body := map[string]any{"facts": func() []expect.Fact {
		out := make([]expect.Fact, len(facts))
		for i, f := range facts {
			out[i] = expect.Fact{FactKey: f.key, ObservedAt: f.observedAt}
		}
		return out
	}()}
	raw, _ := json.Marshal(body)
	status, resp := c.srv.call("POST", "/v1/agents/"+c.agID+"/facts", raw)
	if status >= 200 && status < 300 {
		var out struct {
			Facts []struct {
				FactKey   string
				Satisfied []string
			}
		}
		if err := json.Unmarshal(resp, &out); err != nil || len(out.Facts) != len(facts) {
			c.violate("bad answer", "facts answered %d with %d outcomes for %d facts (%v)", status, len(out.Facts), len(facts), err)
			status = 0
		} else {
			c.mu.Lock()
			for i, fo := range out.Facts {
				f := facts[i]
				if fo.FactKey != f.key {
					c.violations = append(c.violations, Violation{"bad answer", fmt.Sprintf("fact %d answered for key %s, sent %s", i, fo.FactKey, f.key)})
					continue
				}
				for _, id := range fo.Satisfied {
					if owners[i] == nil || id != owners[i].id {
						c.violations = append(c.violations, Violation{"bad answer", fmt.Sprintf("fact %s answered as satisfying %s, whose fact key is another", f.key, id)})
						continue
					}
					if f.claimed {
						c.violations = append(c.violations, Violation{"bad answer", fmt.Sprintf("fact %s answered as satisfying %s twice", f.key, id)})
					}
					f.claimed = true
				}
			}
			c.mu.Unlock()
		}
	} else if status != 0 {
		c.violate("unexpected status", "facts answered %d: %s", status, trim(resp))
	}
	c.finish(o, status)
	return true
}

func (c *campaign) withdraw(round int, rng *rand.Rand) bool {
	k := 1 + rng.Intn(3)
	o := &op{round: round}
	var ids []string
	c.mu.Lock()
	if len(c.raised) == 0 {
		c.mu.Unlock()
		return false
	}
	for i := 0; i < k; i++ {
		e := c.pickLocked(rng, 400, 0)
		if slices.Contains(ids, e.id) {
			continue
		}
		ids = append(ids, e.id)
		e.withdraws = append(e.withdraws, &withdrawSent{op: o})
	}
	o.sent = time.Now()
	c.mu.Unlock()
	c.withdraws.Add(1)
	raw, _ := json.Marshal(map[string]any{"withdraw": ids, "reason": "campaign"})
	status, resp := c.srv.call("POST", "/v1/agents/"+c.agID+"/withdrawals", raw)
	switch {
	case status >= 200 && status < 300:
		var out struct{ Records []*expect.Record }
		if err := json.Unmarshal(resp, &out); err != nil || len(out.Records) != len(ids) {
			c.violate("bad answer", "withdrawal of %v answered %d with %d records (%v)", ids, status, len(out.Records), err)
			status = 0
			break
		}
		for i, r := range out.Records {
			if r.Expectation.ExpectationID != ids[i] || r.State != expect.StateWithdrawn {
				c.violate("bad answer", "withdrawal of %s answered %s in state %s", ids[i], r.Expectation.ExpectationID, r.State)
			}
		}
	case status == http.StatusConflict, status == 0:
		// 409: one of them was no longer open (satisfied or lapsed); all or nothing.
	default:
		c.violate("unexpected status", "withdrawal of %v answered %d: %s", ids, status, trim(resp))
	}
	c.finish(o, status)
	return true
}

func sameBody(a, b expect.Expectation) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func trim(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// ---------------------------------------------------------------------------
// Settle and read back.

// list reads every record of the agent in the given state ("" for all).
func (c *campaign) list(state string) ([]*expect.Record, error) {
	var out []*expect.Record
	next := ""
	for {
		q := url.Values{"limit": {"500"}}
		if state != "" {
			q.Set("state", state)
		}
		if next != "" {
			q.Set("nextToken", next)
		}
		var code int
		var b []byte
		for attempt := 0; ; attempt++ {
			code, b = c.srv.call("GET", "/v1/agents/"+c.agID+"/expectations?"+q.Encode(), nil)
			if code == 200 || attempt == 5 {
				break
			}
			time.Sleep(time.Second)
		}
		if code != 200 {
			return nil, fmt.Errorf("listing expectations: %d %s", code, trim(b))
		}
		var page struct {
			Records   []*expect.Record
			NextToken string
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, fmt.Errorf("listing expectations: %w", err)
		}
		out = append(out, page.Records...)
		if page.NextToken == "" {
			return out, nil
		}
		next = page.NextToken
	}
}

// settle waits (bounded) until no expectation is open and every lapse has a
// lapseTaskId or is dead-lettered, and returns every record.
func (c *campaign) settle(ctx context.Context, bound time.Duration) ([]*expect.Record, error) {
	start := time.Now()
	deadline := start.Add(bound)
	lastPrint := time.Now()
	for {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		polled := time.Now()
		open, err := c.list(string(expect.StateOpen))
		if err != nil {
			return nil, err
		}
		pending := len(open)
		undelivered := 0
		var all []*expect.Record
		if pending == 0 {
			all, err = c.list("")
			if err != nil {
				return nil, err
			}
			for _, r := range all {
				switch {
				case r.State == expect.StateOpen:
					pending++
				case r.State == expect.StateLapsed && r.LapseTaskID == "" && (r.Delivery == nil || !r.Delivery.DeadLettered):
					undelivered++
				}
			}
			if pending == 0 && undelivered == 0 {
				fmt.Fprintf(c.out, "settled in %s: %d records\n", time.Since(start).Round(time.Millisecond), len(all))
				return all, nil
			}
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(c.out, "not settled after %s: %d open, %d lapses undelivered; checking as is\n", bound, pending, undelivered)
			if all == nil {
				if all, err = c.list(""); err != nil {
					return nil, err
				}
			}
			return all, nil
		}
		if time.Since(lastPrint) > 5*time.Second {
			fmt.Fprintf(c.out, "  ... %s: %d open, %d lapses undelivered\n", time.Since(start).Round(time.Second), pending, undelivered)
			lastPrint = time.Now()
		}
		// Listing is not free (on moto it competes with the server for the
		// emulator): keep it to a fifth of the time.
		time.Sleep(max(500*time.Millisecond, 4*time.Since(polled)))
	}
}

// ---------------------------------------------------------------------------
// Check.

type receipt struct {
	messageIDs map[string]int // messageId -> times received
	taskIDs    map[string]bool
	lapse      map[string]bool // lapse kind + dueAt seen
}

func (c *campaign) check(recs []*expect.Record, received []a2atest.Received, res *Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := func(kind, format string, args ...any) {
		c.violations = append(c.violations, Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	lost := func(format string, args ...any) {
		res.Lost++
		v("lost", format, args...)
	}
	byID := map[string]*expect.Record{}
	for _, r := range recs {
		id := r.Expectation.ExpectationID
		if byID[id] != nil {
			v("duplicate record", "%s is listed twice", id)
		}
		byID[id] = r
		if c.exps[id] == nil {
			v("phantom", "the server holds %s, which was never raised", id)
		}
	}
	// What the agent received, by expectation.
	got := map[string]*receipt{}
	res.AgentMessages = len(received)
	for _, m := range received {
		md, _ := m.Metadata[expect.URI].(map[string]any)
		l, _ := md["lapse"].(map[string]any)
		id, _ := l["expectationId"].(string)
		kind, _ := l["lapse"].(string)
		due, _ := l["dueAt"].(string)
		if id == "" {
			v("agent", "the agent received message %s without a lapse in its metadata", m.MessageID)
			continue
		}
		if want := expect.MessageID(id, expect.LapseKind(kind), due); m.MessageID != want {
			v("duplicated", "the agent received a lapse of %s (%s, dueAt %s) under messageId %s, want %s", id, kind, due, m.MessageID, want)
		}
		rc := got[id]
		if rc == nil {
			rc = &receipt{messageIDs: map[string]int{}, taskIDs: map[string]bool{}, lapse: map[string]bool{}}
			got[id] = rc
		}
		if rc.messageIDs[m.MessageID] > 0 {
			res.Redelivered++
		}
		rc.messageIDs[m.MessageID]++
		rc.taskIDs[m.TaskID] = true
		rc.lapse[kind+" "+due] = true
	}
	for id, rc := range got {
		if len(rc.messageIDs) > 1 {
			res.Duplicated++
			v("duplicated", "the agent received the lapse of %s under %d messageIds %v", id, len(rc.messageIDs), keys(rc.messageIDs))
		}
		r := byID[id]
		if r == nil || r.State != expect.StateLapsed {
			state := "no record"
			if r != nil {
				state = string(r.State)
			}
			v("spurious lapse", "the agent received a lapse of %s, which is %s", id, state)
		}
	}

	for _, id := range c.order {
		e := c.exps[id]
		r := byID[id]
		res.ExpectationsRaised++
		var claims []*factSent
		touchedByFact := false
		for _, f := range e.facts {
			if f.op.out == acked {
				res.Facts++
				if f.claimed {
					claims = append(claims, f)
				}
			}
			if f.op.out == unknown || (f.op.out == acked && f.claimed) {
				touchedByFact = true
			}
		}
		var wAcked []*withdrawSent
		touchedByWithdraw := false
		for _, w := range e.withdraws {
			if w.op.out == acked {
				wAcked = append(wAcked, w)
				res.Withdrawals++
			}
			if w.op.out != rejected {
				touchedByWithdraw = true
			}
		}
		if r == nil {
			switch e.raise.out {
			case acked:
				lost("%s: its raise was acknowledged (round %d) but the record is gone", id, e.raise.round)
			case rejected:
			default:
				// unknown raise that did not commit: nothing else may refer to it.
			}
			if len(claims) > 0 || len(wAcked) > 0 {
				lost("%s: facts or withdrawals on it were acknowledged but the record is gone", id)
			}
			if got[id] != nil {
				v("spurious lapse", "the agent received a lapse of %s, which does not exist", id)
			}
			continue
		}
		res.Expectations++
		if e.raise.out == rejected {
			v("phantom", "%s exists although its raise was answered %d", id, e.raise.status)
		}
		if !sameBody(r.Expectation, e.body) {
			v("state", "%s: stored body differs from the one raised", id)
		}
		if r.ProjectedDueAt != e.body.DueAt {
			v("state", "%s: projectedDueAt %s, raised with dueAt %s", id, r.ProjectedDueAt, e.body.DueAt)
		}
		// The due time: as raised, or re-anchored on the anchor's satisfaction.
		if r.DueAt != e.body.DueAt {
			ok := false
			if e.body.Anchor != nil {
				if a := byID[e.body.Anchor.ExpectationID]; a != nil && a.SatisfiedBy != nil {
					off, _ := expect.ParseDuration(e.body.Anchor.Offset)
					obs, _ := expect.ParseTime(a.ObservedAt)
					ok = r.DueAt == expect.FormatTime(off.AddTo(obs))
				}
			}
			if !ok {
				v("state", "%s: dueAt %s is neither its raised dueAt %s nor its anchor's satisfaction plus offset", id, r.DueAt, e.body.DueAt)
			}
		}
		switch r.State {
		case expect.StateSatisfied:
			res.Satisfied++
		case expect.StateWithdrawn:
			res.Withdrawn++
		case expect.StateLapsed:
			res.Lapses++
		}
		// Facts.
		if len(claims) > 1 {
			v("state", "%s was answered as satisfied by %d acknowledged facts; only the first can satisfy it", id, len(claims))
		}
		if len(claims) > 0 {
			f := claims[0]
			if r.SatisfiedBy == nil {
				lost("%s: an acknowledged fact (round %d, observedAt %s) satisfied it, but it is %s without satisfiedBy", id, f.op.round, f.observedAt, r.State)
			} else if r.ObservedAt != f.observedAt {
				lost("%s: satisfied by the acknowledged fact observed at %s, but records observedAt %s", id, f.observedAt, r.ObservedAt)
			}
			if r.State == expect.StateLapsed && r.Lapse != nil {
				if lt, err := expect.ParseTime(r.Lapse.LapsedAt); err == nil && lt.After(f.op.done) {
					v("state", "%s lapsed at %s, after the fact that satisfied it was acknowledged (%s)", id, r.Lapse.LapsedAt, expect.FormatTime(f.op.done))
				}
			}
		}
		if r.SatisfiedBy != nil {
			ok := false
			for _, f := range e.facts {
				if (f.op.out == unknown || f.claimed) && f.observedAt == r.ObservedAt {
					ok = true
				}
			}
			if !ok || r.SatisfiedBy.FactKey != e.body.SatisfiedBy.FactKey {
				v("phantom", "%s records a satisfying fact (%s at %s) that no acknowledged or unanswered fact carried", id, r.SatisfiedBy.FactKey, r.ObservedAt)
			}
			if r.State == expect.StateWithdrawn || r.State == expect.StateOpen {
				v("state", "%s is %s with a satisfying fact", id, r.State)
			}
			if r.State == expect.StateSatisfied {
				obs, _ := expect.ParseTime(r.ObservedAt)
				due, _ := expect.ParseTime(r.DueAt)
				if r.Late != obs.After(due) {
					v("state", "%s: late=%v but observedAt %s, dueAt %s", id, r.Late, r.ObservedAt, r.DueAt)
				}
			}
			if r.State == expect.StateLapsed {
				res.Late++
				if !r.Late {
					v("state", "%s is lapsed and satisfied afterwards but not marked late", id)
				}
			}
		} else if r.State == expect.StateSatisfied {
			v("state", "%s is satisfied without satisfiedBy", id)
		}
		// An acknowledged fact that did not satisfy it found it withdrawn or
		// already satisfied; both are final.
		for _, f := range e.facts {
			if f.op.out == acked && !f.claimed && r.SatisfiedBy == nil && r.State != expect.StateWithdrawn {
				v("state", "%s: an acknowledged fact on its key (round %d, observedAt %s) did not satisfy it, yet it is %s with no satisfying fact", id, f.op.round, f.observedAt, r.State)
				break
			}
		}
		// Withdrawals.
		if len(wAcked) > 0 && r.State != expect.StateWithdrawn {
			lost("%s: its withdrawal was acknowledged (round %d) but it is %s", id, wAcked[0].op.round, r.State)
		}
		if r.State == expect.StateWithdrawn && !touchedByWithdraw {
			v("phantom", "%s is withdrawn but no withdrawal of it was acknowledged or left unanswered", id)
		}
		// Instants: nothing it was sent can have resolved it, so it lapsed.
		if !touchedByFact && !touchedByWithdraw && r.State != expect.StateLapsed {
			lost("%s: no fact or withdrawal reached it and its grace ended at %s, yet it is %s", id, expect.FormatTime(r.GraceEnd()), r.State)
		}
		if r.State == expect.StateOpen {
			v("state", "%s is still open after settling (grace end %s)", id, expect.FormatTime(r.GraceEnd()))
		}
		// Skips: a successor satisfied by an acknowledged fact before this
		// one's grace end skips it when nothing else resolved it.
		if !touchedByFact && !touchedByWithdraw && e.body.Anchor == nil {
			var ge time.Time
			if d, err := expect.ParseDuration(e.body.Grace); err == nil || e.body.Grace == "" {
				due, _ := expect.ParseTime(e.body.DueAt)
				ge = due
				if e.body.Grace != "" {
					ge = d.AddTo(due)
				}
			}
			for _, sid := range e.successors {
				for _, f := range c.exps[sid].facts {
					if f.op.out == acked && f.claimed && f.op.done.Before(ge) && (r.Lapse == nil || r.Lapse.Lapse != expect.Skipped) {
						v("state", "%s: its successor %s was satisfied by a fact acknowledged at %s, before its grace end %s, yet it is %s (%s), not skipped",
							id, sid, expect.FormatTime(f.op.done), expect.FormatTime(ge), r.State, lapseKind(r))
					}
				}
			}
		}
		// The lapse itself.
		if r.State == expect.StateLapsed {
			l := r.Lapse
			if l == nil {
				v("state", "%s is lapsed without a lapse", id)
				continue
			}
			if l.DueAt != r.DueAt || l.ExpectationID != id || l.ProjectedDueAt != e.body.DueAt {
				v("state", "%s: lapse carries dueAt %s projectedDueAt %s, record dueAt %s", id, l.DueAt, l.ProjectedDueAt, r.DueAt)
			}
			lapsedAt, _ := expect.ParseTime(l.LapsedAt)
			switch l.Lapse {
			case expect.Overdue:
				if lapsedAt.Before(r.GraceEnd()) {
					v("state", "%s lapsed overdue at %s, before its grace end %s", id, l.LapsedAt, expect.FormatTime(r.GraceEnd()))
				}
			case expect.Skipped:
				if len(l.SatisfiedAfter) == 0 {
					v("state", "%s was skipped with no satisfied successor named", id)
				}
				for _, sid := range l.SatisfiedAfter {
					s := byID[sid]
					if !slices.Contains(e.successors, sid) || s == nil || s.SatisfiedBy == nil {
						v("state", "%s was skipped after %s, which is not a satisfied successor of it", id, sid)
					}
				}
			default:
				v("state", "%s lapsed %q; it has no horizon, so only overdue or skipped are possible", id, l.Lapse)
			}
			want := expect.MessageID(id, l.Lapse, l.DueAt)
			if r.Delivery == nil || r.Delivery.MessageID != want {
				v("duplicated", "%s: delivery messageId %v, want %s", id, r.Delivery, want)
			}
			if r.Delivery != nil && r.Delivery.DeadLettered {
				lost("%s: its lapse was dead-lettered (%d attempts, last error %q)", id, r.Delivery.Attempts, r.Delivery.LastError)
			}
			rc := got[id]
			switch {
			case rc == nil:
				lost("%s lapsed %s (lapseTaskId %q) but the agent never received it", id, l.Lapse, r.LapseTaskID)
			case rc.messageIDs[want] == 0:
				lost("%s lapsed %s but the agent received only messageIds %v, not %s", id, l.Lapse, keys(rc.messageIDs), want)
			case r.LapseTaskID == "":
				lost("%s: the agent received its lapse but the record has no lapseTaskId", id)
			case !rc.taskIDs[r.LapseTaskID]:
				v("state", "%s: lapseTaskId %s is none of the tasks the agent created for it", id, r.LapseTaskID)
			}
			if rc != nil && (len(rc.lapse) != 1 || !rc.lapse[string(l.Lapse)+" "+l.DueAt]) {
				v("duplicated", "%s: the agent received lapses %v, the record says %s %s", id, keys(rc.lapse), l.Lapse, l.DueAt)
			}
		} else if r.Lapse != nil || r.LapseTaskID != "" {
			v("state", "%s is %s but carries a lapse", id, r.State)
		}
	}
	for _, f := range c.noise {
		if f.op.out == acked {
			res.Facts++
			if f.claimed {
				v("phantom", "fact %s, which names no expectation, was answered as satisfying one", f.key)
			}
		}
	}
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

func lapseKind(r *expect.Record) string {
	if r.Lapse == nil {
		return "no lapse"
	}
	return string(r.Lapse.Lapse)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (c *campaign) report(res *Result) {
	out := c.out
	fmt.Fprintf(out, "\n== kill -9 campaign ==\n")
	if c.cfg.NoKill {
		fmt.Fprintf(out, "rounds (baseline, no kill):          %d\n", res.Rounds)
	} else {
		fmt.Fprintf(out, "rounds survived (kill -9 + restart): %d\n", res.Rounds)
	}
	fmt.Fprintf(out, "operations acknowledged:             %d (unknown %d, refused %d; requests: %d raises, %d fact reports, %d withdrawals)\n",
		res.Acked, res.Unknown, res.Refused, res.Raises, res.FactReports, res.WithdrawalRequests)
	fmt.Fprintf(out, "expectations checked:                %d of %d raised (satisfied %d, withdrawn %d, lapsed %d of which %d satisfied late)\n",
		res.Expectations, res.ExpectationsRaised, res.Satisfied, res.Withdrawn, res.Lapses, res.Late)
	fmt.Fprintf(out, "facts checked:                       %d acknowledged\n", res.Facts)
	fmt.Fprintf(out, "withdrawals checked:                 %d acknowledged\n", res.Withdrawals)
	fmt.Fprintf(out, "lapses checked:                      %d (agent messages %d, redelivered with the same messageId %d)\n", res.Lapses, res.AgentMessages, res.Redelivered)
	fmt.Fprintf(out, "lost:                                %d\n", res.Lost)
	fmt.Fprintf(out, "duplicated messageIds:               %d\n", res.Duplicated)
	if f := res.Faults; f != nil {
		fmt.Fprintf(out, "faults injected by the emulator:     %d throttled calls, %d transaction conflicts, %d items hidden from lagging GSI queries\n",
			f.Throttled, f.Conflicts, f.HiddenFromIndex)
	}
	fmt.Fprintf(out, "sustained load:                      %.0f ops/s under load (%.1fs), %.0f ops/s over the campaign's wall time (%.1fs, restarts included)\n",
		res.OpsPerSec, res.LoadTime.Seconds(), res.WallOpsPerSec, res.WallTime.Seconds())
	if res.Rounds > 0 {
		fmt.Fprintf(out, "restart after kill -9:               mean %dms, max %dms\n", (res.SumRestart / time.Duration(res.Rounds)).Milliseconds(), res.MaxRestart.Milliseconds())
	}
	if len(res.Violations) == 0 {
		fmt.Fprintf(out, "violations:                          0\n")
		return
	}
	byKind := map[string][]string{}
	for _, v := range res.Violations {
		byKind[v.Kind] = append(byKind[v.Kind], v.Detail)
	}
	fmt.Fprintf(out, "VIOLATIONS:                          %d\n", len(res.Violations))
	for _, k := range keys(byKind) {
		fmt.Fprintf(out, "  %s: %d\n", k, len(byKind[k]))
		for i, d := range byKind[k] {
			if i == 20 {
				fmt.Fprintf(out, "    ... and %d more\n", len(byKind[k])-20)
				break
			}
			fmt.Fprintf(out, "    %s\n", d)
		}
	}
}
