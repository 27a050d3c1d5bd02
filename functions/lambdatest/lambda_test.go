package lambdatest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
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
// deployment does (GOOS=linux CGO_ENABLED=0 -tags lambda.norpc -trimpath -ldflags '-s -w'),
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
			args := append([]string{"build", "-tags=lambda.norpc", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", binDir + string(filepath.Separator)}, pkgs...)
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

// ---- a function under aws-lambda-rie ----

// ---- the emulator's output ----

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
