package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

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
	// The campaign's agents run on loopback.
	// Waits between delivery attempts of at most 5 s: the campaign checks
	// that nothing is lost or sent twice across kills, and a minute-long
	// wait (the default policy's, for a lapse failing since the campaign
	// began) would only stretch its settling.
	args = append(args, "-tokens", tokens, "-allow-private-agents", "-log-level", "warn", "-delivery-max-wait", "5s")
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
