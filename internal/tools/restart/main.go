// Command restart measures how the embedded default restarts with many
// expectations open: it builds functions/local, starts it on a fresh data
// directory, raises N open expectations through the HTTP API (due far
// ahead), kills the server with SIGKILL, starts it again and prints the
// time until it answers (GET /healthz, then an authenticated read), its
// resident memory at that moment and some seconds later, and how late a
// fresh expectation lapses after the restart.
//
//	go run ./internal/tools/restart -n 100000
//	go run ./internal/tools/restart -n 1000000 -after 30s
//	go run ./internal/tools/restart -n 1000000 -due 6m -grace PT2H -down 4m -after 5m
//
// The last is a downtime: all come due while the server is down, their
// grace ends two hours ahead, and the restart catches them up.
//
// The data directory is created under -tmp and deleted at the end (unless
// -keep). Traffic goes only to the server it starts on 127.0.0.1.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/expect"
)

const token = "restart-token"

var (
	n        = flag.Int("n", 100000, "open expectations to raise before the kill")
	due      = flag.Duration("due", time.Hour, "how far ahead the raised expectations are due")
	grace    = flag.String("grace", "PT10M", "grace of the raised expectations (with a grace each has two instants: due and grace end)")
	conc     = flag.Int("c", 16, "concurrent raise requests (50 expectations each)")
	after    = flag.Duration("after", 30*time.Second, "when to read the resident memory again after the restart")
	settle   = flag.Duration("settle", 5*time.Second, "wait after the last raise before the kill")
	tmp      = flag.String("tmp", os.TempDir(), "where the data directory is created")
	dataDir  = flag.String("data", "", "use this data directory as is (its expectations already raised) instead of raising into a fresh one")
	keep     = flag.Bool("keep", false, "keep the data directory")
	bin      = flag.String("bin", "", "server binary (default: go build ./functions/local)")
	restarts = flag.Int("restarts", 1, "kill -9 and restart this many times")
	down     = flag.Duration("down", 0, "stay down this long after the kill before the (first) restart: a downtime, during which raised expectations may come due (with -due short and -grace long, a backlog past due whose grace ends are ahead)")
)

func main() {
	flag.Parse()
	work, err := os.MkdirTemp(*tmp, "clockwork-restart-")
	check(err)
	defer os.RemoveAll(work)
	server := *bin
	if server == "" {
		server = filepath.Join(work, "local")
		out, err := exec.Command("go", "build", "-o", server, "./functions/local").CombinedOutput()
		if err != nil {
			fail(fmt.Errorf("build: %v\n%s", err, out))
		}
	}
	tokens := filepath.Join(work, "tokens.json")
	tf, _ := json.Marshal(auth.File{Tokens: []auth.TokenSpec{{Token: token, Principal: "restart", Scopes: auth.AllScopes, Agents: []string{"*"}}}})
	check(os.WriteFile(tokens, tf, 0o600))
	data := *dataDir
	fresh := data == ""
	if fresh {
		data = filepath.Join(work, "data")
		if *keep {
			d, err := os.MkdirTemp(*tmp, "clockwork-restart-data-")
			check(err)
			data = d
			fmt.Printf("data kept in %s\n", data)
		}
	}
	fmt.Printf("clockwork restart: server %s, data %s, %d cores\n", server, data, numCPU())

	s := start(server, data, tokens)
	fmt.Printf("first start: ready after %s\n", s.ready.Round(time.Millisecond))
	if fresh {
		s.put("/v1/agents/restart", card())
		t0 := time.Now()
		raise(s, *n, time.Now().Add(*due))
		d := time.Since(t0)
		fmt.Printf("raised %d open expectations (due in %s) in %.1fs (%.0f/s)\n", *n, *due, d.Seconds(), float64(*n)/d.Seconds())
		time.Sleep(*settle)
	}
	fmt.Printf("before the kill: %s; data %s\n", s.mem(), dirSize(data))

	for round := 1; round <= *restarts; round++ {
		s.kill9()
		if round == 1 && *down > 0 {
			fmt.Printf("down for %s\n", *down)
			time.Sleep(*down)
		}
		s = start(server, data, tokens)
		fmt.Printf("\nrestart %d after kill -9: /healthz answered after %s; an authenticated read after %s\n", round, s.ready.Round(time.Millisecond), s.readReady().Round(time.Millisecond))
		fmt.Printf("  at ready:        %s\n", s.mem())
		late := s.lapseLateness()
		fmt.Printf("  a fresh expectation due 2 s after the restart lapsed %s after its instant\n", late)
		if wait := *after - time.Since(s.started); wait > 0 {
			time.Sleep(wait)
		}
		fmt.Printf("  %s after start: %s\n", time.Since(s.started).Round(time.Second), s.mem())
	}
	s.stop()
	if fresh && !*keep {
		os.RemoveAll(data)
	}
}

type server struct {
	cmd     *exec.Cmd
	url     string
	started time.Time
	ready   time.Duration
	client  *http.Client
}

// start runs the server on a free loopback port and polls GET /healthz
// every 2 ms until it answers 200; ready is the time from exec to that answer.
func start(bin, data, tokens string) *server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := ln.Addr().String()
	ln.Close()
	s := &server{url: "http://" + addr, client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	s.cmd = exec.Command(bin, "-addr", addr, "-data", data, "-tokens", tokens, "-allow-private-agents", "-log-level", "warn")
	stderr, _ := s.cmd.StderrPipe()
	s.cmd.Stdout = io.Discard
	s.started = time.Now()
	check(s.cmd.Start())
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(os.Stderr, "  server:", sc.Text())
		}
	}()
	probe := &http.Client{Timeout: time.Second}
	for {
		res, err := probe.Get(s.url + "/healthz")
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == 200 {
				s.ready = time.Since(s.started)
				return s
			}
		}
		if time.Since(s.started) > 10*time.Minute {
			fail(fmt.Errorf("server not ready after 10 minutes"))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// readReady reads one raised expectation and returns the time from exec to
// its answer.
func (s *server) readReady() time.Duration {
	code, _ := s.do("GET", "/v1/agents/restart/expectations/x-0", nil)
	if code != 200 && code != 404 {
		fail(fmt.Errorf("read after restart: %d", code))
	}
	return time.Since(s.started)
}

// lapseLateness raises one expectation due two seconds from now and
// returns lapsedAt - dueAt once it lapsed.
func (s *server) lapseLateness() time.Duration {
	id := fmt.Sprintf("fresh-%d", time.Now().UnixNano())
	dueAt := time.Now().Add(2 * time.Second)
	body, _ := json.Marshal(map[string]any{"taskId": "t", "contextId": "c", "expectations": []any{expectation(id, dueAt)}})
	if code, b := s.do("POST", "/v1/agents/restart/expectations", body); code != 200 {
		fail(fmt.Errorf("fresh raise: %d %s", code, b))
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		code, b := s.do("GET", "/v1/agents/restart/expectations/"+id, nil)
		if code != 200 {
			continue
		}
		var r expect.Record
		if json.Unmarshal(b, &r) == nil && r.Lapse != nil {
			lapsed, _ := expect.ParseTime(r.Lapse.LapsedAt)
			due, _ := expect.ParseTime(r.DueAt)
			return lapsed.Sub(due)
		}
	}
	fail(fmt.Errorf("the fresh expectation did not lapse within 2 minutes"))
	return 0
}

func (s *server) do(method, path string, body []byte) (int, []byte) {
	req, _ := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := s.client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func (s *server) put(path string, body []byte) {
	if code, b := s.do("PUT", path, body); code != 200 {
		fail(fmt.Errorf("PUT %s: %d %s", path, code, b))
	}
}

// mem reads the server's resident memory from /proc.
func (s *server) mem() string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return "memory unknown: " + err.Error()
	}
	vals := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			vals[k] = strings.TrimSpace(v)
		}
	}
	mb := func(k string) string {
		f := strings.Fields(vals[k])
		if len(f) == 0 {
			return "?"
		}
		kb, _ := strconv.Atoi(f[0])
		return fmt.Sprintf("%d MB", kb/1024)
	}
	return fmt.Sprintf("RSS %s (anonymous %s, file-backed %s), CPU %s", mb("VmRSS"), mb("RssAnon"), mb("RssFile"), s.cpu())
}

// cpu reads the server's user+system CPU time from /proc/<pid>/stat.
func (s *server) cpu() string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return (time.Duration(ut+st) * 10 * time.Millisecond).String()
}

func (s *server) kill9() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
}

func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.kill9()
	}
}

// raise raises n expectations x-0 .. x-(n-1), 50 per request.
func raise(s *server, n int, dueAt time.Time) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for c := 0; c < *conc; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(50)) - 50
				if i >= n || failed.Load() != nil {
					return
				}
				var es []any
				for j := i; j < min(i+50, n); j++ {
					e := expectation(fmt.Sprintf("x-%d", j), dueAt)
					if *grace != "" {
						e["grace"] = *grace
					}
					es = append(es, e)
				}
				body, _ := json.Marshal(map[string]any{"taskId": "t", "contextId": "c", "expectations": es})
				if code, b := s.do("POST", "/v1/agents/restart/expectations", body); code != 200 {
					failed.Store(fmt.Errorf("raise: %d %s", code, b))
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		fail(err)
	}
}

func expectation(id string, dueAt time.Time) map[string]any {
	return map[string]any{"expectationId": id, "kind": "payment", "subject": map[string]any{"type": "invoice", "id": id},
		"expects": "invoice is paid", "satisfiedBy": map[string]any{"factKey": "paid." + id}, "dueAt": expect.FormatTime(dueAt), "basis": "contract"}
}

func card() []byte {
	return []byte(fmt.Sprintf(`{"name":"restart","description":"restart agent","version":"1","supportedInterfaces":[{"url":"http://127.0.0.1:9/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"extensions":[{"uri":%q,"params":{"keepsTime":false,"lapseSkill":"lapse","kinds":[{"kind":"payment","subjectType":"invoice","describes":"An invoice is paid","basis":"contract"}]}}]},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"lapse","name":"lapse","description":"handles lapses","tags":["lapse"]}]}`, expect.URI))
}

func dirSize(dir string) string {
	var total int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			total += info.Size()
		}
		return nil
	})
	return fmt.Sprintf("%d MB", total>>20)
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}

func check(err error) {
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "restart:", err)
	os.Exit(1)
}
