package lambdatest

// Running a bootstrap under aws-lambda-rie: installing the emulator,
// starting a function on a free port, invoking it, and reading the reports
// of its log.

import (
	"bytes"
	"context"
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

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

var (
	reportLine = regexp.MustCompile(`^REPORT RequestId: (\S+)\s+(?:Init Duration: [0-9.]+ ms\s+)?Duration: ([0-9.]+) ms`)
	startEnd   = regexp.MustCompile(`^(START|END) RequestId: `)
)
