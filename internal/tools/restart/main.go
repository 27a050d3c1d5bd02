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
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/tools/toolserver"
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
		server, err = toolserver.Build(work)
		check(err)
	}
	tokens, err := toolserver.Tokens(work, token, "restart")
	check(err)
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
	fmt.Printf("first start: ready after %s\n", s.Ready.Round(time.Millisecond))
	if fresh {
		check(s.Must("PUT", "/v1/agents/restart", toolserver.Card("restart")))
		t0 := time.Now()
		raise(s, *n, time.Now().Add(*due))
		d := time.Since(t0)
		fmt.Printf("raised %d open expectations (due in %s) in %.1fs (%.0f/s)\n", *n, *due, d.Seconds(), float64(*n)/d.Seconds())
		time.Sleep(*settle)
	}
	fmt.Printf("before the kill: %s; data %s\n", s.Memory(), dirSize(data))

	for round := 1; round <= *restarts; round++ {
		s.Kill9()
		if round == 1 && *down > 0 {
			fmt.Printf("down for %s\n", *down)
			time.Sleep(*down)
		}
		s = start(server, data, tokens)
		fmt.Printf("\nrestart %d after kill -9: /healthz answered after %s; an authenticated read after %s\n", round, s.Ready.Round(time.Millisecond), s.readReady().Round(time.Millisecond))
		fmt.Printf("  at ready:        %s\n", s.Memory())
		late := s.lapseLateness()
		fmt.Printf("  a fresh expectation due 2 s after the restart lapsed %s after its instant\n", late)
		if wait := *after - time.Since(s.Started); wait > 0 {
			time.Sleep(wait)
		}
		fmt.Printf("  %s after start: %s\n", time.Since(s.Started).Round(time.Second), s.Memory())
	}
	s.Stop()
	if fresh && !*keep {
		os.RemoveAll(data)
	}
}

type server struct{ *toolserver.Server }

// start runs the server and waits until GET /healthz answers; ready is the
// time from exec to that answer.
func start(bin, data, tokens string) *server {
	s, err := toolserver.Start(bin, data, tokens, token, 10*time.Minute, "-allow-private-agents", "-log-level", "warn")
	check(err)
	return &server{s}
}

// readReady reads one raised expectation and returns the time from exec to
// its answer.
func (s *server) readReady() time.Duration {
	code, _ := s.Do("GET", "/v1/agents/restart/expectations/x-0", nil)
	if code != 200 && code != 404 {
		fail(fmt.Errorf("read after restart: %d", code))
	}
	return time.Since(s.Started)
}

// lapseLateness raises one expectation due two seconds from now and
// returns lapsedAt - dueAt once it lapsed.
func (s *server) lapseLateness() time.Duration {
	id := fmt.Sprintf("fresh-%d", time.Now().UnixNano())
	dueAt := time.Now().Add(2 * time.Second)
	body, _ := json.Marshal(map[string]any{"taskId": "t", "contextId": "c", "expectations": []any{expectation(id, dueAt)}})
	if code, b := s.Do("POST", "/v1/agents/restart/expectations", body); code != 200 {
		fail(fmt.Errorf("fresh raise: %d %s", code, b))
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		code, b := s.Do("GET", "/v1/agents/restart/expectations/"+id, nil)
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
				if code, b := s.Do("POST", "/v1/agents/restart/expectations", body); code != 200 {
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
