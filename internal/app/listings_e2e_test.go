package app

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
)

// scenarioConsoleListings: the listings the web console reads. GET
// /v1/agents lists the cards the token may act for, in agent id order and
// page by page (ids that need escaping in keys, and the longest id,
// included); GET /v1/agents/{agentId}/anticipations lists an agent's
// ANTICIPATEs newest first, and only to a token for that agent. Both read
// a global index, so on the AWS mode they are polled until they show what
// was written.
func scenarioConsoleListings(t *testing.T) {
	e := startEnv(t)
	card := a2atest.NewAgent(t, "1.0").Card()
	long := strings.Repeat("z", 250) + "#%/é"
	ids := []string{"agent-b", "agent-a#1", long}
	for _, id := range ids {
		e.must(200, e.call("PUT", "/v1/agents/"+url.PathEscape(id), card))
	}
	want := []string{"agent-a#1", "agent-b", long}
	var got []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		got = got[:0]
		next := ""
		for pages := 0; pages < 10; pages++ {
			var page struct {
				Agents []struct {
					AgentID string         `json:"agentId"`
					Card    map[string]any `json:"card"`
				} `json:"agents"`
				NextToken string `json:"nextToken"`
			}
			e.must(200, e.call("GET", "/v1/agents?limit=1&nextToken="+url.QueryEscape(next), nil)).json(t, &page)
			for _, a := range page.Agents {
				if a.Card["name"] != "a2atest agent" {
					t.Fatalf("listed card of %q: %v", a.AgentID, a.Card)
				}
				got = append(got, a.AgentID)
			}
			if next = page.NextToken; next == "" {
				break
			}
		}
		if slices.Equal(got, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("agents listed %q, want %q", got, want)
	}
	var other struct {
		Agents []any `json:"agents"`
	}
	e.must(200, e.call("GET", "/v1/agents", nil, otherToken)).json(t, &other)
	if len(other.Agents) != 0 {
		t.Fatalf("a token for someone-else sees %v", other.Agents)
	}
	problem(t, e.must(400, e.call("GET", "/v1/agents?limit=501", nil)))
	problem(t, e.must(400, e.call("GET", "/v1/agents?nextToken=garbage", nil)))

	e.must(201, e.call("POST", "/v1/anticipations", variant(t, "ant-list-1", "plan-list-1")))
	e.must(201, e.call("POST", "/v1/anticipations", variant(t, "ant-list-2", "plan-list-2")))
	var listed []string
	deadline = time.Now().Add(20 * time.Second)
	for {
		var out struct {
			Anticipations []struct {
				Anticipation map[string]any `json:"anticipation"`
				Sealed       bool           `json:"sealed"`
				Digest       string         `json:"digest"`
			} `json:"anticipations"`
		}
		e.must(200, e.call("GET", "/v1/agents/"+seedAgent+"/anticipations", nil)).json(t, &out)
		listed = listed[:0]
		for _, a := range out.Anticipations {
			if !strings.HasPrefix(a.Digest, "sha256:") {
				t.Fatalf("listed anticipation without its digest: %+v", a)
			}
			listed = append(listed, a.Anticipation["anticipation_id"].(string))
		}
		if len(listed) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !slices.Equal(listed, []string{"ant-list-2", "ant-list-1"}) {
		t.Fatalf("anticipations listed %q, want newest first", listed)
	}
	problem(t, e.must(403, e.call("GET", "/v1/agents/"+seedAgent+"/anticipations", nil, otherToken)))
	problem(t, e.must(400, e.call("GET", "/v1/agents/"+seedAgent+"/anticipations?limit=101", nil)))
}
