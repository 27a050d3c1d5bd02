package lambdatest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/awsrt"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/scheduler"
	"github.com/agentclock/clockwork/internal/store/dynamo"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
)

// MaxBootstrapSize bounds each function's bootstrap, per architecture.
const MaxBootstrapSize = 20 << 20 // 20 MiB

// RIEModule is what installRIE installs (into RIECacheDir) when the
// emulator is missing.
const RIEModule = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@latest"

// EnvRIE names a variable that may point at an aws-lambda-rie binary to use
// instead of the cached one.
const EnvRIE = "CLOCKWORK_RIE"

// WarmInvocations is how many warm invocations the latency figures cover.
const WarmInvocations = 200

// TestLambdaBootstraps builds the four functions as Lambda bootstraps,
// checks their size, and runs each under aws-lambda-rie against the moto
// emulator with the environment the deployed functions get, invoking every
// sample event of events/<function> in order (authorizer, api, then clock,
// then stream:
// each builds on the state the previous left) and checking the result
// expected.json gives. It logs each bootstrap's size, each function's cold
// start (process start to the first invocation's response) and the api
// function's warm latency (p50/p99 over WarmInvocations invocations of the
// GET expectation event); it never asserts on time.
//
// Without CI=true, a failure to build, to install aws-lambda-rie or to start
// the emulator skips the test with the reason; with CI=true it fails it.
func TestLambdaBootstraps(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds ten bootstraps and runs five functions")
	}
	if runtime.GOOS != "linux" {
		unavailable(t, "the bootstraps are linux executables and aws-lambda-rie runs on linux only (GOOS=%s)", runtime.GOOS)
	}
	root := moduleRoot(t)
	evs := map[string][]eventFile{}
	for _, fn := range functionNames {
		evs[fn] = loadEvents(t, fn)
	}
	apiWant := loadExpected[int](t, "api", evs["api"])
	authzWant := loadExpected[bool](t, "authorizer", evs["authorizer"])
	streamWant := loadExpected[[]string](t, "stream", evs["stream"])
	clockWant := loadExpected[string](t, "clock", evs["clock"])
	graderWant := loadExpected[string](t, "grader", evs["grader"])
	ingestWant := loadExpected[int](t, "ingest", evs["ingest"])

	// 1. Build, and check the sizes.
	bins := buildBootstraps(t, root)
	for _, fn := range functionNames {
		for _, arch := range buildArchs() {
			fi, err := os.Stat(bins[arch][fn])
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("size %-6s %-5s %6.2f MiB (%d bytes)", fn, arch, float64(fi.Size())/(1<<20), fi.Size())
			if fi.Size() >= MaxBootstrapSize {
				t.Errorf("%s bootstrap for %s is %.2f MiB, over the %d MiB budget", fn, arch, float64(fi.Size())/(1<<20), MaxBootstrapSize>>20)
			}
		}
	}

	// 2. The runtime interface emulator and the AWS emulator.
	rie := installRIE(t)
	endpoint := dynamotest.Start(t)
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	table := fmt.Sprintf("lambdatest-%x", rb)
	db, _ := dynamotest.NewClients(endpoint)
	sched := awsscheduler.NewFromConfig(dynamotest.Config(endpoint), func(o *awsscheduler.Options) { o.BaseEndpoint = aws.String(endpoint) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dynamo.CreateTable(ctx, db, table); err != nil {
		t.Fatalf("create table %s: %v", table, err)
	}
	if err := scheduler.New(sched, scheduler.Config{Group: table}).CreateGroup(ctx); err != nil {
		t.Fatalf("create schedule group %s: %v", table, err)
	}
	env := append(lambdaEnv(t, table, endpoint), "TIMER_QUEUE_URL="+timerQueue(t, endpoint, table))
	native := bins[runtime.GOARCH]

	// 3. authorizer: each request, and the context it hands to the api
	// function is the one the api events carry.
	authz := startFunction(t, rie, "authorizer", native["authorizer"], env)
	for i, e := range evs["authorizer"] {
		out, err := authz.invoke(e.Body, "")
		if i == 0 {
			authz.logColdStart(t)
		}
		if err != nil {
			authz.fail(t, "authorizer %s: %v", e.Name, err)
			continue
		}
		var res events.APIGatewayV2CustomAuthorizerSimpleResponse
		if err := json.Unmarshal(out, &res); err != nil {
			authz.fail(t, "authorizer %s: answered %s: %v", e.Name, out, err)
			continue
		}
		if res.IsAuthorized != authzWant[e.Name] {
			authz.fail(t, "authorizer %s: isAuthorized %v, want %v", e.Name, res.IsAuthorized, authzWant[e.Name])
		}
		if res.IsAuthorized && fmt.Sprint(res.Context) != fmt.Sprint(SampleAuthorizerContext(t)) {
			authz.fail(t, "authorizer %s: context %v, want %v (what the api events carry)", e.Name, res.Context, SampleAuthorizerContext(t))
		}
	}

	// 4. api: every request, then the warm latency.
	api := startFunction(t, rie, "api", native["api"], env)
	for i, e := range evs["api"] {
		resp := api.invokeAPI(t, e)
		if i == 0 {
			api.logColdStart(t)
		}
		if resp.StatusCode != apiWant[e.Name] {
			api.fail(t, "api %s: status %d, want %d: %s", e.Name, resp.StatusCode, apiWant[e.Name], resp.Body)
		}
	}
	if get := findEvent(evs["api"], "get-expectation"); get != nil {
		api.warmLatency(t, *get)
	}

	// 5. clock: each instant of the lapsing expectation (answered null), a
	// timer-queue batch (its batch item failures) and the sweep.
	clock := startFunction(t, rie, "clock", native["clock"], env)
	for i, e := range evs["clock"] {
		out, err := clock.invoke(e.Body, "")
		if i == 0 {
			clock.logColdStart(t)
		}
		if err != nil {
			clock.fail(t, "clock %s: %v", e.Name, err)
			continue
		}
		want := clockWant[e.Name]
		var got string
		switch {
		case want == "ok":
			got = map[bool]string{true: "ok"}[strings.TrimSpace(string(out)) == "null"]
		case want == "sweep":
			var res awsrt.SweepResult
			if strictJSON(out, &res) == nil {
				got = "sweep"
			}
		case strings.HasPrefix(want, "batchItemFailures:"):
			var resp events.SQSEventResponse
			if strictJSON(out, &resp) == nil {
				got = clockAnswer(resp)
			}
		}
		if got != want {
			clock.fail(t, "clock %s: answered %s, want %s", e.Name, out, want)
		}
	}

	// 6. stream: each batch, with its expected partial batch failures.
	stream := startFunction(t, rie, "stream", native["stream"], env)
	for i, e := range evs["stream"] {
		out, err := stream.invoke(e.Body, "")
		if i == 0 {
			stream.logColdStart(t)
		}
		if err != nil {
			stream.fail(t, "stream %s: %v", e.Name, err)
			continue
		}
		var resp events.DynamoDBEventResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			stream.fail(t, "stream %s: answered %s: %v", e.Name, out, err)
			continue
		}
		if got, want := failures(resp), streamWant[e.Name]; !slices.Equal(got, want) {
			stream.fail(t, "stream %s: batchItemFailures %v, want %v", e.Name, got, want)
		}
	}

	// 7. grader: a grading-queue batch (a job of a VERIFY it does not
	// know, done; a body that is not a job, dropped), its batch item
	// failures.
	grader := startFunction(t, rie, "grader", native["grader"], env)
	for i, e := range evs["grader"] {
		out, err := grader.invoke(e.Body, "")
		if i == 0 {
			grader.logColdStart(t)
		}
		if err != nil {
			grader.fail(t, "grader %s: %v", e.Name, err)
			continue
		}
		var resp events.SQSEventResponse
		if err := strictJSON(out, &resp); err != nil || clockAnswer(resp) != graderWant[e.Name] {
			grader.fail(t, "grader %s: answered %s (%v), want %s", e.Name, out, err, graderWant[e.Name])
		}
	}

	// 8. ingest: OTLP exports (none bound to a plan: answered, with the
	// unbound span in partialSuccess).
	ingest := startFunction(t, rie, "ingest", native["ingest"], env)
	for i, e := range evs["ingest"] {
		resp := ingest.invokeAPI(t, e)
		if i == 0 {
			ingest.logColdStart(t)
		}
		if resp.StatusCode != ingestWant[e.Name] {
			ingest.fail(t, "ingest %s: status %d, want %d: %s", e.Name, resp.StatusCode, ingestWant[e.Name], resp.Body)
		}
		if strings.Contains(e.Name, "unbound") && !strings.Contains(resp.Body, `"rejectedSpans":"1"`) {
			ingest.fail(t, "ingest %s: %s, want the span in partialSuccess", e.Name, resp.Body)
		}
	}

	// 9. The effects the stream function had, seen through the api function
	// and the Scheduler API.
	checkEffects(t, api, sched, table)

	// 10. The metrics each function wrote on stdout, as CloudWatch Embedded
	// Metric Format, for what it did.
	checkMetrics(t, api, clock, stream)
}

// unavailable skips t, or fails it when CI=true.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if isCI() {
		t.Fatalf("CI=true, so this fails instead of skipping: "+format, args...)
	}
	t.Skipf(format, args...)
}

func isCI() bool {
	switch strings.ToLower(os.Getenv("CI")) {
	case "true", "1", "yes":
		return true
	}
	return false
}

func findEvent(evs []eventFile, part string) *eventFile {
	for i := range evs {
		if strings.Contains(evs[i].Name, part) {
			return &evs[i]
		}
	}
	return nil
}

// ---- building ----

// buildArchs are the architectures built: both Lambda architectures, and
// the host's (to run) when it is neither.
func buildArchs() []string {
	archs := []string{"amd64", "arm64"}
	if !slices.Contains(archs, runtime.GOARCH) {
		archs = append(archs, runtime.GOARCH)
	}
	return archs
}

// buildBootstraps builds every function for every architecture, as the
// deployment does (GOOS=linux CGO_ENABLED=0 -trimpath -ldflags '-s -w'),
// one go build per architecture, and returns arch -> function -> path of
// its bootstrap (<dir>/<arch>/<function>/bootstrap).
func buildBootstraps(t *testing.T, root string) map[string]map[string]string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not on PATH: %v", err)
	}
	dir := t.TempDir()
	var pkgs []string
	for _, fn := range functionNames {
		pkgs = append(pkgs, "./functions/"+fn)
	}
	out := map[string]map[string]string{}
	errs := map[string]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for _, arch := range buildArchs() {
		archDir := filepath.Join(dir, arch)
		out[arch] = map[string]string{}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			binDir := filepath.Join(archDir, "bin")
			args := append([]string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", binDir + string(filepath.Separator)}, pkgs...)
			cmd := exec.CommandContext(ctx, goTool, args...)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
			b, err := cmd.CombinedOutput()
			if err != nil {
				mu.Lock()
				errs[arch] = fmt.Errorf("GOOS=linux GOARCH=%s CGO_ENABLED=0 go %s: %v\n%s", arch, strings.Join(args, " "), err, b)
				mu.Unlock()
				return
			}
			for _, fn := range functionNames {
				// Lambda's custom runtime runs a file named bootstrap.
				p := filepath.Join(archDir, fn, "bootstrap")
				err := os.MkdirAll(filepath.Dir(p), 0o755)
				if err == nil {
					err = os.Rename(filepath.Join(binDir, fn), p)
				}
				mu.Lock()
				if err != nil {
					errs[arch] = err
				} else {
					out[arch][fn] = p
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, arch := range buildArchs() {
		if err := errs[arch]; err != nil {
			unavailable(t, "build failed: %v", err)
		}
	}
	t.Logf("built %d bootstraps for %v in %s", len(functionNames)*len(buildArchs()), buildArchs(), time.Since(start).Round(time.Millisecond))
	return out
}

// ---- aws-lambda-rie ----

// RIECacheDir is where installRIE keeps aws-lambda-rie.
func RIECacheDir() string {
	if d := os.Getenv("CLOCKWORK_CACHE"); d != "" {
		return filepath.Join(d, "bin")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "clockwork", "bin")
}

// installRIE returns the path of aws-lambda-rie: EnvRIE when set, else the
// cached binary, installed there first with go install when missing.
func installRIE(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(EnvRIE); p != "" {
		if _, err := os.Stat(p); err != nil {
			unavailable(t, "%s=%s: %v", EnvRIE, p, err)
		}
		return p
	}
	dir := RIECacheDir()
	bin := filepath.Join(dir, "aws-lambda-rie")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		unavailable(t, "aws-lambda-rie cache %s: %v", dir, err)
	}
	// Install into a private directory, then rename into place, so that
	// concurrent test processes never see a partial binary.
	tmp, err := os.MkdirTemp(dir, ".install-")
	if err != nil {
		unavailable(t, "aws-lambda-rie cache %s: %v", dir, err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "install", RIEModule)
	cmd.Dir = tmp // outside the module, so go.mod plays no part
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		unavailable(t, "install aws-lambda-rie (GOBIN=%s go install %s): %v\n%s", dir, RIEModule, err, b)
	}
	if err := os.Rename(filepath.Join(tmp, "aws-lambda-rie"), bin); err != nil {
		unavailable(t, "install aws-lambda-rie into %s: %v", dir, err)
	}
	t.Logf("installed aws-lambda-rie into %s in %s", dir, time.Since(start).Round(time.Millisecond))
	return bin
}

// lambdaEnv is the environment of the functions, as the stack sets it
// (AWS_ENDPOINT_URL and the static credentials stand for the emulator and
// the execution role). Nothing is inherited but PATH, so no credential or
// profile of the host reaches the functions, and HOME is empty so no
// shared AWS configuration is read.
func lambdaEnv(t *testing.T, table, endpoint string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"TABLE_NAME=" + table,
		"SCHEDULE_GROUP=" + table,
		"CLOCK_FUNCTION_ARN=" + ClockFunctionARN,
		"SCHEDULER_ROLE_ARN=" + SchedulerRoleARN,
		"SCHEDULER_DLQ_ARN=" + SchedulerDLQARN,
		"TOKENS_JSON=" + TokensJSON(), // the authorizer's
		"TRUST_AUTHORIZER=true",       // the api function's, as deployed
		"ALLOW_PRIVATE_AGENTS=true",
		"AWS_ENDPOINT_URL=" + endpoint,
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=60",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256",
		"LOG_LEVEL=warn", // aws-lambda-rie's own logs
		"METRICS_NAMESPACE=" + MetricsNamespace,
	}
}

// ---- a function under aws-lambda-rie ----

type function struct {
	name    string
	url     string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when aws-lambda-rie has exited
	logs    *rieLog
	started time.Time
	client  *http.Client

	coldOnce sync.Once
	up       time.Duration // process start to accepting connections
	cold     time.Duration // process start to the first answer
	firstID  string
	lastID   string // of the last invocation
	seq      int
	bad      bool // an invocation of this function went wrong: show its output
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// startFunction starts aws-lambda-rie with the bootstrap on two free
// loopback ports. The process and the runtime it starts are killed when
// the test ends.
func startFunction(t *testing.T, rie, name, bootstrap string, env []string) *function {
	t.Helper()
	rieAddr, apiAddr := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
	f := &function{
		name:   name,
		url:    "http://" + rieAddr + "/2015-03-31/functions/function/invocations",
		logs:   newRIELog(),
		exited: make(chan struct{}),
		client: &http.Client{Timeout: 90 * time.Second},
	}
	env = append(slices.Clone(env), "AWS_LAMBDA_FUNCTION_NAME=clockwork-"+name)
	f.cmd = exec.Command(rie, "--runtime-interface-emulator-address", rieAddr, "--runtime-api-address", apiAddr, bootstrap)
	f.cmd.Dir = filepath.Dir(bootstrap)
	f.cmd.Env = env
	f.cmd.Stdout = f.logs
	f.cmd.Stderr = f.logs
	f.started = time.Now()
	if err := f.cmd.Start(); err != nil {
		unavailable(t, "start aws-lambda-rie: %v", err)
	}
	go func() { _ = f.cmd.Wait(); close(f.exited) }()
	t.Cleanup(func() { f.stop(t) })
	return f
}

// stop ends aws-lambda-rie and the runtime process it started (in a
// process group of its own), each by its pid.
func (f *function) stop(t *testing.T) {
	runtimes := childPIDs(f.cmd.Process.Pid)
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.exited:
	case <-time.After(5 * time.Second):
		_ = f.cmd.Process.Kill()
		<-f.exited
	}
	for _, pid := range runtimes {
		// Only the bootstrap this emulator started (a pid is not reused
		// while its process has not been reaped by its parent, but check
		// the name anyway).
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(comm)) == "bootstrap" {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if f.bad {
		t.Logf("%s: aws-lambda-rie and function output (tail):\n%s", f.name, f.logs.tail())
	}
}

// fail reports an error about this function, whose output the test then
// shows.
func (f *function) fail(t *testing.T, format string, args ...any) {
	t.Helper()
	f.bad = true
	t.Errorf(format, args...)
}

// childPIDs returns the pids whose parent is pid.
func childPIDs(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) >= 2 && fields[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// invoke sends one event and returns the function's answer. The first call
// waits for the emulator to listen (the function's cold start is measured
// up to its answer). A function error (errorType/errorMessage) is an error.
func (f *function) invoke(body []byte, requestID string) (_ []byte, err error) {
	defer func() {
		if err != nil {
			f.bad = true
		}
	}()
	f.seq++
	if requestID == "" {
		requestID = fmt.Sprintf("%s-%04d", f.name, f.seq)
	}
	f.lastID = requestID
	deadline := time.Now().Add(60 * time.Second)
	if f.seq == 1 {
		if err := f.waitListening(deadline); err != nil {
			return nil, err
		}
	}
	for {
		req, err := http.NewRequest("POST", f.url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Amzn-RequestId", requestID)
		resp, err := f.client.Do(req)
		if err != nil {
			if isRefused(err) && time.Now().Before(deadline) {
				select {
				case <-f.exited:
					return nil, fmt.Errorf("invoke %s: aws-lambda-rie exited: %w", f.name, err)
				case <-time.After(2 * time.Millisecond):
					continue
				}
			}
			return nil, fmt.Errorf("invoke %s: %w", f.name, err)
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		f.coldOnce.Do(func() { f.cold, f.firstID = time.Since(f.started), requestID })
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return out, fmt.Errorf("invoke %s: emulator answered %d: %s", f.name, resp.StatusCode, out)
		}
		var fe struct {
			ErrorType    string `json:"errorType"`
			ErrorMessage string `json:"errorMessage"`
		}
		if json.Unmarshal(out, &fe) == nil && (fe.ErrorType != "" || fe.ErrorMessage != "") {
			return out, fmt.Errorf("function %s failed: %s: %s", f.name, fe.ErrorType, fe.ErrorMessage)
		}
		return out, nil
	}
}

// waitListening waits until the emulator accepts connections.
func (f *function) waitListening(deadline time.Time) error {
	addr := strings.TrimPrefix(f.url, "http://")
	addr = addr[:strings.IndexByte(addr, '/')]
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			f.up = time.Since(f.started)
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("aws-lambda-rie of %s does not listen on %s: %w", f.name, addr, err)
		}
		select {
		case <-f.exited:
			return fmt.Errorf("aws-lambda-rie of %s exited before listening", f.name)
		case <-time.After(time.Millisecond):
		}
	}
}

func isRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// invokeAPI sends an API Gateway event and decodes the HTTP response the
// function returns.
func (f *function) invokeAPI(t *testing.T, e eventFile) events.APIGatewayV2HTTPResponse {
	t.Helper()
	out, err := f.invoke(e.Body, "")
	if err != nil {
		t.Fatalf("api %s: %v", e.Name, err)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("api %s: answered %s: %v", e.Name, out, err)
	}
	return resp
}

// logColdStart reports the cold start: from starting aws-lambda-rie to the
// first answer, split into the emulator's own start (until it listens) and
// the first invocation, which includes starting and initialising the
// bootstrap (the emulator starts the runtime on the first request, as
// Lambda does on a cold start), and the duration the emulator reports for
// that invocation.
func (f *function) logColdStart(t *testing.T) {
	t.Helper()
	reported := "n/a"
	if rep, ok := f.logs.report(f.firstID, 5*time.Second); ok {
		reported = fmt.Sprintf("%.1f ms", ms(rep.duration))
	}
	t.Logf("cold start %-6s %6.1f ms from process start to first response = emulator up %.1f ms + first invocation %.1f ms (emulator-reported %s)",
		f.name, ms(f.cold), ms(f.up), ms(f.cold-f.up), reported)
}

// warmLatency invokes e WarmInvocations times and reports the round trip
// and the handler duration the emulator measured, p50 and p99.
func (f *function) warmLatency(t *testing.T, e eventFile) {
	t.Helper()
	var rtts, durs []time.Duration
	var ids []string
	for i := range WarmInvocations {
		id := fmt.Sprintf("%s-warm-%04d", f.name, i)
		start := time.Now()
		out, err := f.invoke(e.Body, id)
		rtts = append(rtts, time.Since(start))
		if err != nil {
			t.Fatalf("warm invocation %d of %s: %v", i, e.Name, err)
		}
		var resp events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != 200 {
			t.Fatalf("warm invocation %d of %s: %s", i, e.Name, out)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		if rep, ok := f.logs.report(id, 5*time.Second); ok {
			durs = append(durs, rep.duration)
		}
	}
	t.Logf("warm %s %s x%d: round trip p50 %.2f ms p99 %.2f ms; handler (emulator-reported, %d reports) p50 %.2f ms p99 %.2f ms",
		f.name, e.Name, len(rtts), ms(percentile(rtts, 50)), ms(percentile(rtts, 99)), len(durs), ms(percentile(durs, 50)), ms(percentile(durs, 99)))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile returns the nearest-rank percentile p of ds (0 when empty).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}

// ---- the emulator's output ----

// report is what a REPORT line of aws-lambda-rie says of one invocation.
type report struct {
	duration time.Duration
}

// rieLog keeps the tail of the output of aws-lambda-rie and of the function
// (whose output the emulator forwards), without the START, END and REPORT
// lines, and the duration in the REPORT line of every invocation.
type rieLog struct {
	mu      sync.Mutex
	buf     []byte
	emf     []byte // the function's Embedded Metric Format lines, all of them
	partial []byte
	reports map[string]report
	changed chan struct{}
}

func newRIELog() *rieLog {
	return &rieLog{reports: map[string]report{}, changed: make(chan struct{})}
}

var (
	reportLine = regexp.MustCompile(`^REPORT RequestId: (\S+)\s+(?:Init Duration: [0-9.]+ ms\s+)?Duration: ([0-9.]+) ms`)
	startEnd   = regexp.MustCompile(`^(START|END) RequestId: `)
)

func (l *rieLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := l.partial[:i+1]
		if bytes.Contains(line, []byte(`"_aws"`)) {
			l.emf = append(l.emf, line...)
		}
		switch m := reportLine.FindSubmatch(line); {
		case m != nil:
			v, _ := strconv.ParseFloat(string(m[2]), 64)
			l.reports[string(m[1])] = report{duration: time.Duration(v * float64(time.Millisecond))}
			close(l.changed)
			l.changed = make(chan struct{})
		case startEnd.Match(line):
		default:
			l.buf = append(l.buf, line...)
			if over := len(l.buf) - 8<<10; over > 0 {
				l.buf = l.buf[over:]
			}
		}
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

// report waits up to within for the REPORT line of requestID.
func (l *rieLog) report(requestID string, within time.Duration) (report, bool) {
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		l.mu.Lock()
		r, ok := l.reports[requestID]
		changed := l.changed
		l.mu.Unlock()
		if ok {
			return r, true
		}
		select {
		case <-changed:
		case <-timer.C:
			return report{}, false
		}
	}
}

func (l *rieLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(bytes.ToValidUTF8(l.buf, nil))
}

// ---- effects ----

// checkEffects checks, through the api function and the Scheduler API,
// what the clock and stream functions did: the lapse of the lapsing
// expectation and its recorded delivery attempt (the agent's URL refuses
// connections), the three schedules of the scheduled expectation, and the
// VERIFY of the completed plan (the seed's criteria all met: PASS).
func checkEffects(t *testing.T, api *function, sched *awsscheduler.Client, group string) {
	t.Helper()
	get := func(route, path string, params map[string]string, v any) {
		t.Helper()
		body := apiEvent{file: "check.json", method: "GET", route: route, params: params}.encode(t, 0)
		resp := api.invokeAPI(t, eventFile{Name: path, Body: body})
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Body)
		}
		if err := json.Unmarshal([]byte(resp.Body), v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, resp.Body)
		}
	}
	const recRoute = "/v1/agents/{agentId}/expectations/{expectationId}"

	var lapsed expect.Record
	get(recRoute, Lapsing, map[string]string{"agentId": AgentID, "expectationId": Lapsing}, &lapsed)
	if lapsed.State != expect.StateLapsed || lapsed.Lapse == nil || lapsed.Lapse.Lapse != expect.Overdue {
		t.Errorf("%s: state %s, lapse %+v; want lapsed overdue (the clock function)", Lapsing, lapsed.State, lapsed.Lapse)
	} else if d := lapsed.Delivery; d == nil || d.Attempts != 1 || d.LastError == "" || d.DeliveredAt != "" {
		t.Errorf("%s: delivery %+v; want one failed attempt recorded (the stream function)", Lapsing, d)
	} else {
		t.Logf("%s: lapsed %s, delivery attempt recorded: %q", Lapsing, lapsed.Lapse.Lapse, d.LastError)
	}

	var open expect.Record
	get(recRoute, Scheduled, map[string]string{"agentId": AgentID, "expectationId": Scheduled}, &open)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ins := expect.Instants(&open)
	if len(ins) != 3 {
		t.Errorf("%s has %d instants, want 3", Scheduled, len(ins))
	}
	// The stream function has a timer queue: each schedule is set for the
	// minute before its instant's.
	planned := scheduler.New(sched, scheduler.Config{Group: group, QueueURL: "the timer queue"})
	for _, in := range ins {
		name := scheduler.NameAt(in, planned.FireTime(in))
		if _, err := sched.GetSchedule(ctx, &awsscheduler.GetScheduleInput{GroupName: aws.String(group), Name: aws.String(name)}); err != nil {
			t.Errorf("schedule of the %s instant of %s (%s): %v", in.Kind, Scheduled, name, err)
		}
	}

	var vs struct {
		Verifications []anticipate.Verification `json:"verifications"`
	}
	get("/v1/anticipations/{id}/verifications", "verifications", map[string]string{"id": AnticipationID}, &vs)
	if len(vs.Verifications) != 1 || vs.Verifications[0].Verdict != "PASS" {
		t.Errorf("verifications of %s: %+v; want one PASS (the stream function's VERIFY)", AnticipationID, vs.Verifications)
	} else {
		t.Logf("VERIFY of %s: %s, score %v", PlanID, vs.Verifications[0].Verdict, vs.Verifications[0].Score)
	}
}
