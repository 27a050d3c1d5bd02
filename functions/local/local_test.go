package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
)

// buildServer compiles this command once per test binary.
func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "local")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

type server struct {
	cmd   *exec.Cmd
	url   string
	token string
	// metrics is the URL of /metrics, with -metrics-addr.
	metrics string
}

// startServer runs the real binary and reads where it listens (and the
// printed token) from its standard output.
func startServer(t *testing.T, bin string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-log-level", "warn"}, args...)...)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd}
	sc := bufio.NewScanner(stdout)
	deadline := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "clockwork listening on "); ok {
			s.url = strings.Fields(rest)[0]
		}
		if rest, ok := strings.CutPrefix(line, "token (every scope, every agent; printed once): "); ok {
			s.token = strings.TrimSpace(rest)
		}
		if rest, ok := strings.CutPrefix(line, "metrics on "); ok {
			s.metrics = strings.TrimSpace(rest)
		}
		if s.url != "" && (s.token != "" || hasFlag(args, "-tokens")) && (s.metrics != "" || !hasFlag(args, "-metrics-addr")) {
			break
		}
	}
	if s.url == "" {
		t.Fatal("server did not print where it listens")
	}
	go io.Copy(io.Discard, stdout)
	return s
}

func hasFlag(args []string, f string) bool {
	for _, a := range args {
		if a == f {
			return true
		}
	}
	return false
}

func (s *server) kill9() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
}

func (s *server) call(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		if raw, ok := body.([]byte); ok {
			b = raw
		}
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func TestServerPrintsAddressAndToken(t *testing.T) {
	bin := buildServer(t)
	s := startServer(t, bin, "-data", t.TempDir())
	defer s.kill9()
	if !strings.HasPrefix(s.token, "cw_") {
		t.Fatalf("token %q", s.token)
	}
	if code, _ := s.call(t, "GET", "/v1/agents/x", nil); code != 404 {
		t.Fatalf("authorized call answered %d", code)
	}
	s.token = "nope"
	if code, _ := s.call(t, "GET", "/v1/agents/x", nil); code != 401 {
		t.Fatalf("bad token answered %d", code)
	}
	// Refuses to listen beyond loopback without a tokens file.
	out, err := exec.Command(bin, "-addr", "0.0.0.0:0", "-data", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not loopback") {
		t.Fatalf("non-loopback without tokens: %v %s", err, out)
	}
	// And with one, not in clear: TLS or a proxy that terminates it.
	tokensFile := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(tokensFile, []byte(`{"tokens":[{"token":"t","principal":"p","scopes":["read"],"agents":["*"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "-addr", "0.0.0.0:0", "-data", t.TempDir(), "-tokens", tokensFile).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "-tls-cert") {
		t.Fatalf("non-loopback in clear: %v %s", err, out)
	}
}

// TestKill9LosesNothing kills the real server with SIGKILL several times
// while expectations come due, then checks that every committed expectation
// is there, every lapse reached the agent, and no lapse reached it under
// two different messageIds.
func TestKill9LosesNothing(t *testing.T) {
	bin := buildServer(t)
	data := t.TempDir()
	agent := a2atest.NewAgent(t, "1.0")
	s := startServer(t, bin, "-data", data)
	token := s.token
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	os.WriteFile(tokens, []byte(fmt.Sprintf(`{"tokens":[{"token":%q,"principal":"ops","scopes":["agents:write","expectations:write","facts:write","read"],"agents":["*"]}]}`, token)), 0o600)
	if code, b := s.call(t, "PUT", "/v1/agents/agent-1", agent.Card()); code != 200 {
		t.Fatalf("card: %d %s", code, b)
	}
	raised := map[string]bool{}
	satisfied := map[string]bool{}
	n := 0
	for round := 0; round < 4; round++ {
		// Raise a batch due over the next second, satisfy every third.
		for i := 0; i < 30; i++ {
			id := fmt.Sprintf("e-%d", n)
			n++
			due := expect.FormatTime(time.Now().Add(time.Duration(50+i*30) * time.Millisecond))
			body := map[string]any{"taskId": "task-1", "contextId": "ctx-1", "expectations": []any{map[string]any{
				"expectationId": id, "kind": "payment", "subject": map[string]any{"type": "invoice", "id": id},
				"expects": "paid", "satisfiedBy": map[string]any{"factKey": "paid." + id}, "dueAt": due, "basis": "contract",
			}}}
			if code, b := s.call(t, "POST", "/v1/agents/agent-1/expectations", body); code == 200 {
				raised[id] = true
			} else if code != 0 {
				t.Fatalf("raise: %d %s", code, b)
			}
			if i%3 == 0 {
				f := map[string]any{"facts": []any{map[string]any{"factKey": "paid." + id, "observedAt": expect.FormatTime(time.Now())}}}
				var out struct {
					Facts []struct{ Satisfied []string }
				}
				if code, b := s.call(t, "POST", "/v1/agents/agent-1/facts", f); code == 200 {
					json.Unmarshal(b, &out)
					if len(out.Facts) == 1 && len(out.Facts[0].Satisfied) == 1 {
						satisfied[id] = true
					}
				}
			}
		}
		time.Sleep(time.Duration(200+round*150) * time.Millisecond)
		s.kill9()
		time.Sleep(300 * time.Millisecond)
		s = startServer(t, bin, "-data", data, "-tokens", tokens, "-allow-private-agents")
		s.token = token
	}
	defer s.kill9()
	// Wait for every expectation to be resolved and every lapse delivered.
	deadline := time.Now().Add(60 * time.Second)
	var lapsed map[string]string
	for {
		lapsed = map[string]string{}
		pending := 0
		for id := range raised {
			code, b := s.call(t, "GET", "/v1/agents/agent-1/expectations/"+id, nil)
			if code != 200 {
				t.Fatalf("committed expectation %s lost: %d %s", id, code, b)
			}
			var r expect.Record
			json.Unmarshal(b, &r)
			switch {
			case satisfied[id] && r.SatisfiedBy == nil:
				// (A fact that came after the lapse is recorded as late; the
				// record stays lapsed but keeps the fact.)
				t.Fatalf("%s was satisfied before a crash, now %s without its fact", id, r.State)
			case r.State == expect.StateLapsed && r.LapseTaskID != "":
				lapsed[id] = r.Delivery.MessageID
			case r.State == expect.StateSatisfied:
			default:
				pending++
			}
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d expectations never resolved", pending)
		}
		time.Sleep(100 * time.Millisecond)
	}
	seen := map[string]map[string]bool{}
	for _, m := range agent.Received() {
		md, _ := m.Metadata[expect.URI].(map[string]any)
		l, _ := md["lapse"].(map[string]any)
		id, _ := l["expectationId"].(string)
		if seen[id] == nil {
			seen[id] = map[string]bool{}
		}
		seen[id][m.MessageID] = true
	}
	for id, mid := range lapsed {
		if len(seen[id]) != 1 || !seen[id][mid] {
			t.Fatalf("lapse of %s reached the agent under messageIds %v, want exactly %s", id, seen[id], mid)
		}
	}
	for id := range seen {
		if _, ok := lapsed[id]; !ok {
			t.Fatalf("agent got a lapse for %s, which did not lapse", id)
		}
	}
	t.Logf("raised %d, satisfied %d, lapsed and delivered %d, agent messages %d, 4 kill -9 rounds", len(raised), len(satisfied), len(lapsed), len(agent.Received()))
}

// TestKill9RestartCatchesUpWhatCameDue kills the server (SIGKILL) with
// expectations open: some due while it is down, more due an hour later.
// It is killed again in the middle of the catch-up. After the last restart
// every expectation that came due lapses and reaches the agent under one
// messageId, the later ones stay open, and the server answers at once.
func TestKill9RestartCatchesUpWhatCameDue(t *testing.T) {
	bin := buildServer(t)
	data := t.TempDir()
	agent := a2atest.NewAgent(t, "1.0")
	s := startServer(t, bin, "-data", data)
	token := s.token
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	os.WriteFile(tokens, []byte(fmt.Sprintf(`{"tokens":[{"token":%q,"principal":"ops","scopes":["agents:write","expectations:write","read"],"agents":["*"]}]}`, token)), 0o600)
	if code, b := s.call(t, "PUT", "/v1/agents/agent-1", agent.Card()); code != 200 {
		t.Fatalf("card: %d %s", code, b)
	}
	raise := func(prefix string, n int, due func(i int) time.Time) {
		for i := 0; i < n; i += 50 {
			var es []any
			for j := i; j < min(i+50, n); j++ {
				id := fmt.Sprintf("%s-%03d", prefix, j)
				es = append(es, map[string]any{"expectationId": id, "kind": "payment", "subject": map[string]any{"type": "invoice", "id": id},
					"expects": "paid", "satisfiedBy": map[string]any{"factKey": "paid." + id}, "dueAt": expect.FormatTime(due(j)), "basis": "contract"})
			}
			if code, b := s.call(t, "POST", "/v1/agents/agent-1/expectations", map[string]any{"taskId": "task-1", "contextId": "ctx-1", "expectations": es}); code != 200 {
				t.Fatalf("raise: %d %s", code, b)
			}
		}
	}
	const nDue, nLater = 200, 400
	firstDue := time.Now().Add(3 * time.Second)
	raise("later", nLater, func(int) time.Time { return time.Now().Add(time.Hour) })
	raise("due", nDue, func(i int) time.Time { return firstDue.Add(time.Duration(i) * 5 * time.Millisecond) })
	s.kill9()
	time.Sleep(time.Until(firstDue.Add(nDue*5*time.Millisecond + 200*time.Millisecond)))
	s = startServer(t, bin, "-data", data, "-tokens", tokens, "-allow-private-agents")
	s.token = token
	time.Sleep(30 * time.Millisecond)
	s.kill9()
	s = startServer(t, bin, "-data", data, "-tokens", tokens, "-allow-private-agents")
	s.token = token
	defer s.kill9()
	if code, _ := s.call(t, "GET", "/v1/agents/agent-1/expectations/later-000", nil); code != 200 {
		t.Fatalf("read after restart: %d", code)
	}
	lapsed := map[string]string{}
	deadline := time.Now().Add(60 * time.Second)
	for len(lapsed) < nDue {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d expectations due while down lapsed and were delivered", len(lapsed), nDue)
		}
		time.Sleep(100 * time.Millisecond)
		for i := 0; i < nDue; i++ {
			id := fmt.Sprintf("due-%03d", i)
			if _, ok := lapsed[id]; ok {
				continue
			}
			code, b := s.call(t, "GET", "/v1/agents/agent-1/expectations/"+id, nil)
			if code != 200 {
				t.Fatalf("%s: %d %s", id, code, b)
			}
			var r expect.Record
			json.Unmarshal(b, &r)
			if r.State == expect.StateLapsed && r.LapseTaskID != "" {
				lapsed[id] = r.Delivery.MessageID
			}
		}
	}
	seen := map[string]map[string]bool{}
	for _, m := range agent.Received() {
		md, _ := m.Metadata[expect.URI].(map[string]any)
		l, _ := md["lapse"].(map[string]any)
		id, _ := l["expectationId"].(string)
		if seen[id] == nil {
			seen[id] = map[string]bool{}
		}
		seen[id][m.MessageID] = true
	}
	for id, mid := range lapsed {
		if len(seen[id]) != 1 || !seen[id][mid] {
			t.Fatalf("lapse of %s reached the agent under messageIds %v, want exactly %s", id, seen[id], mid)
		}
	}
	if len(seen) != nDue {
		t.Fatalf("the agent got lapses of %d expectations, want %d", len(seen), nDue)
	}
	for _, i := range []int{0, nLater / 2, nLater - 1} {
		code, b := s.call(t, "GET", fmt.Sprintf("/v1/agents/agent-1/expectations/later-%03d", i), nil)
		var r expect.Record
		json.Unmarshal(b, &r)
		if code != 200 || r.State != expect.StateOpen {
			t.Fatalf("later-%03d: %d %s", i, code, r.State)
		}
	}
	t.Logf("%d due while down: lapsed and delivered once each after two kill -9; %d due later still open", nDue, nLater)
}
