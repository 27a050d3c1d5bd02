// Package dynamotest runs a DynamoDB emulator for tests, without Docker, and
// makes clients and tables for it.
//
// The emulator is moto's server (DynamoDB, DynamoDB Streams, transactions),
// installed once into a cached virtualenv and started by
// localstack/dynamodb-emulator.sh on a free loopback port; see that script.
// One instance serves a whole test binary. When CLOCKWORK_DYNAMODB_ENDPOINT
// is set (for example http://127.0.0.1:8000) that endpoint is used instead
// and nothing is started.
//
// When the emulator cannot start, Start skips the test with the reason, or
// fails it when CI=true: CI never passes by skipping.
package dynamotest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store/dynamo"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/smithy-go/middleware"
)

// EnvEndpoint names the variable that, when set, points the tests at a
// running emulator instead of starting one.
const EnvEndpoint = "CLOCKWORK_DYNAMODB_ENDPOINT"

// Script is the path of the emulator script, relative to the module root.
const Script = "localstack/dynamodb-emulator.sh"

// StartTimeout bounds the start of the emulator, including its one-time
// installation from PyPI on a cold cache (one to two minutes).
const StartTimeout = 8 * time.Minute

var shared struct {
	once     sync.Once
	endpoint string
	stop     func()
	err      error
}

// StartMain returns the endpoint of the test binary's emulator, starting it
// on the first call (later calls return the same result). stop ends an
// emulator that StartMain started and is a no-op otherwise; it is safe to
// call more than once, and an emulator left running ends anyway when the
// test binary exits (it watches its standard input). It suits TestMain:
//
//	func TestMain(m *testing.M) {
//		_, stop, _ := dynamotest.StartMain() // Start(t) reports the error
//		code := m.Run()
//		stop()
//		os.Exit(code)
//	}
//
// It returns an error when EnvEndpoint is set but does not answer, when the
// script cannot be found above the working directory, or when the emulator
// does not print its endpoint and answer within StartTimeout (the error
// holds the tail of its output).
func StartMain() (endpoint string, stop func(), err error) {
	shared.once.Do(func() {
		shared.stop = func() {}
		if ep := os.Getenv(EnvEndpoint); ep != "" {
			shared.endpoint = ep
			shared.err = waitAnswer(ep, 30*time.Second)
			return
		}
		shared.endpoint, shared.stop, shared.err = start()
	})
	return shared.endpoint, shared.stop, shared.err
}

// Start returns the endpoint of the test binary's emulator (see StartMain).
// When the emulator is unavailable it skips t with the reason, or fails t
// when the environment variable CI is true.
func Start(t testing.TB) string {
	t.Helper()
	ep, _, err := StartMain()
	if err != nil {
		if isCI() {
			t.Fatalf("DynamoDB emulator unavailable (CI=true, so this fails instead of skipping): %v", err)
		}
		t.Skipf("DynamoDB emulator unavailable: %v", err)
	}
	return ep
}

func isCI() bool {
	switch strings.ToLower(os.Getenv("CI")) {
	case "true", "1", "yes":
		return true
	}
	return false
}

// Config returns an AWS config for the emulator at endpoint: region
// us-east-1, static credentials "local"/"local", BaseEndpoint set to
// endpoint, and apiOptions (for example dynamo.CountingMiddleware). It reads
// no environment variable or shared config file, so requests go to endpoint
// only.
func Config(endpoint string, apiOptions ...func(*middleware.Stack) error) aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
		BaseEndpoint: aws.String(endpoint),
		APIOptions:   apiOptions,
	}
}

// NewClients returns a DynamoDB and a DynamoDB Streams client for the
// emulator at endpoint, configured by Config.
func NewClients(endpoint string, apiOptions ...func(*middleware.Stack) error) (*dynamodb.Client, *dynamodbstreams.Client) {
	cfg := Config(endpoint, apiOptions...)
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	st := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(endpoint) })
	return db, st
}

// NewTable creates a table with a unique name (prefix plus random hex) and
// the adapter's layout (dynamo.CreateTable), deletes it when t ends, and
// returns its name. It fails t when the table cannot be created.
func NewTable(t testing.TB, client *dynamodb.Client, prefix string) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random table name: %v", err)
	}
	name := prefix + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dynamo.CreateTable(ctx, client, name); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
			t.Logf("delete table %s: %v", name, err)
		}
	})
	return name
}

// findScript looks for Script in the working directory and its parents, then
// beside this source file.
func findScript() (string, error) {
	var roots []string
	if wd, err := os.Getwd(); err == nil {
		roots = append(roots, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		roots = append(roots, filepath.Dir(file))
	}
	for _, dir := range roots {
		for {
			p := filepath.Join(dir, filepath.FromSlash(Script))
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("%s not found above the working directory", Script)
}

// tail keeps the last bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - 4096; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(bytes.ToValidUTF8(t.buf, nil)))
}

// start runs the script and waits for its endpoint.
func start() (string, func(), error) {
	script, err := findScript()
	if err != nil {
		return "", func() {}, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return "", func() {}, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return "", func() {}, err
	}
	logs := &tail{}
	cmd := exec.Command("bash", script, "run", "--port", "0", "--exit-on-stdin-eof")
	cmd.Stdin = inR
	cmd.Stdout = outW
	cmd.Stderr = logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return "", func() {}, fmt.Errorf("start %s: %w", script, err)
	}
	inR.Close()
	outW.Close()

	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(outR)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if ep, ok := strings.CutPrefix(line, "READY "); ok && !sent {
				ready <- strings.TrimSpace(ep)
				sent = true
				continue
			}
			_, _ = logs.Write([]byte(line + "\n"))
		}
		_, _ = io.Copy(io.Discard, outR)
		outR.Close()
	}()

	var once sync.Once
	stop := func() {
		once.Do(func() {
			inW.Close() // the emulator exits at end of stdin
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
		})
	}

	deadline := time.NewTimer(StartTimeout)
	defer deadline.Stop()
	select {
	case ep := <-ready:
		if err := waitAnswer(ep, 30*time.Second); err != nil {
			stop()
			return "", func() {}, fmt.Errorf("%w; emulator output: %s", err, logs)
		}
		return ep, stop, nil
	case <-done:
		stop()
		return "", func() {}, fmt.Errorf("%s exited before serving (%v): %s", Script, waitErr, logs)
	case <-deadline.C:
		stop()
		return "", func() {}, fmt.Errorf("%s did not serve within %s: %s", Script, StartTimeout, logs)
	}
}

// waitAnswer waits until endpoint answers HTTP at all.
func waitAnswer(endpoint string, within time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		resp, err := client.Get(endpoint)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return nil
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Join(fmt.Errorf("DynamoDB emulator at %s does not answer", endpoint), last)
}

// Faults are the faults the emulator injects (see class Faults in
// localstack/emulator/faults.py): what moto does not do and DynamoDB
// does. The zero value turns them all off.
type Faults struct {
	// GSILag hides an item from global secondary index queries for this
	// long after each write of it (DynamoDB's GSIs are eventually
	// consistent; moto's are immediate).
	GSILag time.Duration
	// Throttle is the fraction of data-plane calls (and stream GetRecords)
	// refused with a throttling error the SDK retries.
	Throttle float64
	// TransactionConflict is the fraction of TransactWriteItems cancelled
	// with a TransactionConflict reason.
	TransactionConflict float64
	// TransactionThrottle is the fraction of TransactWriteItems cancelled
	// with a ThrottlingError or ProvisionedThroughputExceeded reason (a
	// throttled partition), which the SDK does not retry.
	TransactionThrottle float64
	// LoseAnswers makes the next LoseAnswers successful single-item writes
	// (PutItem, UpdateItem, DeleteItem) to the table LoseAnswersTable be
	// applied and answered with HTTP 500 InternalServerError, which the SDK
	// retries: a lost answer to a write DynamoDB did apply.
	LoseAnswers      int
	LoseAnswersTable string
	// SchedulerThrottle is the fraction of EventBridge Scheduler writes
	// (create, update, delete a schedule) refused with HTTP 429
	// ThrottlingException; 1 is a sustained throttle.
	SchedulerThrottle float64
	// Seed seeds the emulator's random choices; zero leaves them as they are.
	Seed int64
}

// FaultCounts counts the faults the emulator injected since it started.
type FaultCounts struct {
	Throttled       int `json:"throttled"`
	Conflicts       int `json:"conflicts"`
	TxThrottled     int `json:"transactionsThrottled"`
	HiddenFromIndex int `json:"hiddenFromIndex"`
	LostAnswers     int `json:"lostAnswers"`
	// SchedulerThrottled counts the Scheduler writes refused.
	SchedulerThrottled int `json:"schedulerThrottled"`
}

// DefaultFaults are the faults the AWS-mode tests run with: GSIs 2 s
// behind, 2% of calls throttled, 2% of transactions conflicting, 5% of
// transactions cancelled for throttling.
var DefaultFaults = Faults{GSILag: 2 * time.Second, Throttle: 0.02, TransactionConflict: 0.02, TransactionThrottle: 0.05}

// SetFaults sets the faults of the emulator at endpoint (for every client
// of it) and returns the counts so far. It fails t when the emulator does
// not take them (an emulator at EnvEndpoint that is not this project's).
func SetFaults(t testing.TB, endpoint string, f Faults) FaultCounts {
	t.Helper()
	c, err := PostFaults(endpoint, f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// PostFaults is SetFaults for callers without a testing.TB (the campaign).
// It returns an error naming what failed.
func PostFaults(endpoint string, f Faults) (FaultCounts, error) {
	table, _ := json.Marshal(f.LoseAnswersTable)
	body := fmt.Sprintf(`{"gsiLagSeconds":%g,"throttle":%g,"transactionConflict":%g,"transactionThrottle":%g,"schedulerThrottle":%g,"loseAnswers":%d,"loseAnswersTable":%s,"seed":%d}`,
		f.GSILag.Seconds(), f.Throttle, f.TransactionConflict, f.TransactionThrottle, f.SchedulerThrottle, f.LoseAnswers, table, f.Seed)
	res, err := http.Post(endpoint+"/_clockwork/faults", "application/json", strings.NewReader(body))
	if err != nil {
		return FaultCounts{}, fmt.Errorf("dynamotest: set faults: %w", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var state struct {
		Counts FaultCounts `json:"counts"`
	}
	if res.StatusCode != http.StatusOK {
		return FaultCounts{}, fmt.Errorf("dynamotest: set faults: %s: %s", res.Status, b)
	}
	if err := json.Unmarshal(b, &state); err != nil {
		return FaultCounts{}, fmt.Errorf("dynamotest: set faults: %w (%s)", err, b)
	}
	return state.Counts, nil
}
