// Package toolserver runs the embedded server (functions/local) as a child
// process for the measurement tools (internal/tools/restart, churn): it
// builds the binary, writes a tokens file, starts the server on a free
// loopback port and waits for it, calls its API, reads its memory and CPU
// from /proc, and stops or kills it. Traffic goes only to 127.0.0.1.
package toolserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/expect"
)

// Build builds functions/local into dir and returns the binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "local")
	if out, err := exec.Command("go", "build", "-o", bin, "./functions/local").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build: %v\n%s", err, out)
	}
	return bin, nil
}

// Tokens writes a tokens file in dir with one token of every scope for
// every agent, and returns its path.
func Tokens(dir, token, principal string) (string, error) {
	path := filepath.Join(dir, "tokens.json")
	b, _ := json.Marshal(auth.File{Tokens: []auth.TokenSpec{{Token: token, Principal: principal, Scopes: auth.AllScopes, Agents: []string{"*"}}}})
	return path, os.WriteFile(path, b, 0o600)
}

// Server is one running server.
type Server struct {
	Cmd *exec.Cmd
	URL string
	// Started is when it was started; Ready how long it took to answer
	// GET /healthz.
	Started time.Time
	Ready   time.Duration
	token   string
	client  *http.Client
}

// Start runs bin on a free loopback port with data, tokens and args, its
// standard error copied to ours, and polls GET /healthz every 2 ms until it
// answers 200 (at most timeout).
func Start(bin, data, tokens, token string, timeout time.Duration, args ...string) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &Server{URL: "http://" + addr, token: token, client: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	s.Cmd = exec.Command(bin, append([]string{"-addr", addr, "-data", data, "-tokens", tokens}, args...)...)
	stderr, _ := s.Cmd.StderrPipe()
	s.Cmd.Stdout = io.Discard
	s.Started = time.Now()
	if err := s.Cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(os.Stderr, "  server:", sc.Text())
		}
	}()
	probe := &http.Client{Timeout: time.Second}
	for {
		if res, err := probe.Get(s.URL + "/healthz"); err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == 200 {
				s.Ready = time.Since(s.Started)
				return s, nil
			}
		}
		if time.Since(s.Started) > timeout {
			s.Kill9()
			return nil, fmt.Errorf("server not ready after %s", timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Do sends one authenticated request and returns the status and body (0
// and the error's text when it could not be sent).
func (s *Server) Do(method, path string, body []byte) (int, []byte) {
	req, _ := http.NewRequest(method, s.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := s.client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// Must sends one request and returns an error unless it answers 200.
func (s *Server) Must(method, path string, body []byte) error {
	if code, b := s.Do(method, path, body); code != 200 {
		return fmt.Errorf("%s %s: %d %s", method, path, code, b)
	}
	return nil
}

// status reads the server's /proc status lines into a map.
func (s *Server) status() map[string]string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.Cmd.Process.Pid))
	if err != nil {
		return nil
	}
	vals := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			vals[k] = strings.TrimSpace(v)
		}
	}
	return vals
}

func mb(vals map[string]string, k string) string {
	f := strings.Fields(vals[k])
	if len(f) == 0 {
		return "?"
	}
	kb, _ := strconv.Atoi(f[0])
	return fmt.Sprintf("%d MB", kb/1024)
}

// RSS is the server's resident memory.
func (s *Server) RSS() string { return mb(s.status(), "VmRSS") }

// Memory is the server's resident memory, anonymous and file-backed, and
// its CPU time.
func (s *Server) Memory() string {
	vals := s.status()
	if vals == nil {
		return "memory unknown"
	}
	return fmt.Sprintf("RSS %s (anonymous %s, file-backed %s), CPU %s", mb(vals, "VmRSS"), mb(vals, "RssAnon"), mb(vals, "RssFile"), s.CPU())
}

// CPU is the server's user+system CPU time from /proc/<pid>/stat.
func (s *Server) CPU() string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.Cmd.Process.Pid))
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return (time.Duration(ut+st) * 10 * time.Millisecond).String()
}

// Kill9 kills the server with SIGKILL and waits for it.
func (s *Server) Kill9() {
	s.Cmd.Process.Signal(syscall.SIGKILL)
	s.Cmd.Wait()
}

// Stop ends the server with SIGTERM, killing it after 30 s.
func (s *Server) Stop() {
	s.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.Kill9()
	}
}

// Card is an A2A 1.0 card of agent name declaring the kind payment on
// invoices, whose JSON-RPC endpoint (port 9) takes no connection.
func Card(name string) []byte {
	return []byte(fmt.Sprintf(`{"name":%q,"description":"%s agent","version":"1","supportedInterfaces":[{"url":"http://127.0.0.1:9/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"extensions":[{"uri":%q,"params":{"keepsTime":false,"lapseSkill":"lapse","kinds":[{"kind":"payment","subjectType":"invoice","describes":"An invoice is paid","basis":"contract"}]}}]},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"lapse","name":"lapse","description":"handles lapses","tags":["lapse"]}]}`, name, name, expect.URI))
}
