//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestGettingStarted runs every shell block of docs/getting-started.md as
// written, with bash from the repository root, against binaries built from
// this repository: the expectation loop (a lapse reaches the demo agent, a
// fact satisfies the other expectation), then the evaluation loop (the
// Python emitter signs the ANTICIPATE with RFC 8785, the plan's events are
// sent, the VERIFY passes). The only changes are the substitutions below,
// as in TestREADMEFirstSession.
func TestGettingStarted(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds two binaries and installs rfc8785 into a cached virtualenv")
	}
	needTools(t, "the getting-started page", "bash", "curl", "date", "mktemp", "python3")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "getting-started.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := shellBlocks(string(page))
	if len(blocks) != 8 {
		t.Fatalf("the page has %d sh blocks, want 8 (server, agent, raise, fact, records, declare, events, VERIFY)", len(blocks))
	}
	bin := buildBinaries(t, root)
	env := append(os.Environ(), "TMPDIR="+t.TempDir())
	substitute := substituter(t, string(page), blocks)
	substitute("go run ./functions/local", filepath.Join(bin, "local")+" -addr 127.0.0.1:0")
	substitute("go run ./examples/demo-agent", filepath.Join(bin, "demo-agent"))

	server := startBlock(t, root, env, blocks[0])
	url := server.out.waitFor(t, "the server's address", 60*time.Second, regexp.MustCompile(`^clockwork listening on (http://\S+)`))
	token := server.out.waitFor(t, "the server's token", 60*time.Second, regexp.MustCompile(`^token \(every scope, every agent; printed once\): (\S+)$`))
	substitute("CLOCKWORK=http://127.0.0.1:8080", "CLOCKWORK="+url[1])
	substitute("TOKEN=...", "TOKEN="+token[1])
	agent := startBlock(t, root, env, blocks[1])
	agent.out.waitFor(t, "the demo agent to listen", 60*time.Second, regexp.MustCompile(`^demo-agent listening on `))

	sh := startShell(t, root, env)
	if out := sh.run(t, blocks[2]); !strings.Contains(out, `"expectationId":"inv-42-paid"`) || !strings.Contains(out, `"state":"open"`) {
		t.Fatalf("raising answered:\n%s", out)
	}
	agent.out.waitFor(t, "the lapse of inv-42-paid", 60*time.Second, regexp.MustCompile(`^lapse: inv-42-paid is overdue .*skill handle-lapse, context ctx-1, origin task task-1`))
	if out := sh.run(t, blocks[3]); !strings.Contains(out, `"satisfied":["inv-43-paid"]`) {
		t.Fatalf("the fact answered:\n%s", out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := sh.run(t, blocks[4])
		var list struct {
			Records []struct {
				State       string `json:"state"`
				LapseTaskID string `json:"lapseTaskId"`
				Expectation struct {
					ExpectationID string `json:"expectationId"`
				} `json:"expectation"`
			} `json:"records"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("the records block answered %v:\n%s", err, out)
		}
		states := map[string]string{}
		delivered := false
		for _, r := range list.Records {
			states[r.Expectation.ExpectationID] = r.State
			delivered = delivered || r.LapseTaskID != ""
		}
		if states["inv-42-paid"] == "lapsed" && states["inv-43-paid"] == "satisfied" && delivered {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the records are %v (lapse task recorded: %v), want inv-42-paid lapsed and inv-43-paid satisfied", states, delivered)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out := sh.run(t, blocks[5]); !strings.HasPrefix(out, "201") || !strings.Contains(out, `"anticipation_id":"ant-collect-43"`) {
		t.Fatalf("the Python emitter's ANTICIPATE answered:\n%s", out)
	}
	if out := sh.run(t, blocks[6]); strings.Count(out, `"event_id"`) != 6 {
		t.Fatalf("the plan's events answered:\n%s", out)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out := sh.run(t, blocks[7])
		if strings.Contains(out, `"verdict":"PASS"`) {
			break
		}
		if time.Now().After(deadline) || strings.Contains(out, `"verdict":"FAIL"`) {
			t.Fatalf("the VERIFY is not PASS:\n%s", out)
		}
	}
}
