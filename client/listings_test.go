package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/agentclock/clockwork/client"
)

// TestListings reads the two listings the web console uses through the
// client: the agents with their cards, and an agent's anticipations.
func TestListings(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, startServer(t), client.Options{})
	for _, id := range []string{"agent-b", "agent-a"} {
		if _, err := c.PutCard(ctx, id, testCard("http://127.0.0.1:9/a2a")); err != nil {
			t.Fatal(err)
		}
	}
	first, err := c.ListAgents(ctx, 1, "")
	if err != nil || len(first.Agents) != 1 || first.Agents[0].AgentID != "agent-a" || first.NextToken == "" {
		t.Fatalf("first page: %v %+v", err, first)
	}
	var card struct{ Name string }
	if err := json.Unmarshal(first.Agents[0].Card, &card); err != nil || card.Name != "client-test" {
		t.Fatalf("listed card: %v %s", err, first.Agents[0].Card)
	}
	second, err := c.ListAgents(ctx, 1, first.NextToken)
	if err != nil || len(second.Agents) != 1 || second.Agents[0].AgentID != "agent-b" {
		t.Fatalf("second page: %v %+v", err, second)
	}
	if _, err := c.ListAgents(ctx, 501, ""); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("limit 501: %v", err)
	}

	seed, err := os.ReadFile("../internal/anticipate/testdata/seed_anticipate.json")
	if err != nil {
		t.Fatal(err)
	}
	var ant client.Anticipate
	if err := json.Unmarshal(seed, &ant); err != nil {
		t.Fatal(err)
	}
	ant.AnticipationID, ant.PlanID, ant.AgentID = "ant-listed", "plan-listed", "agent-a"
	signed, err := client.Sign(&ant)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeclareAnticipation(ctx, signed); err != nil {
		t.Fatal(err)
	}
	page, err := c.ListAnticipations(ctx, "agent-a", 0, "")
	if err != nil || len(page.Anticipations) != 1 || page.Anticipations[0].Digest == "" {
		t.Fatalf("anticipations: %v %+v", err, page)
	}
	if empty, err := c.ListAnticipations(ctx, "agent-b", 0, ""); err != nil || len(empty.Anticipations) != 0 {
		t.Fatalf("agent-b: %v %+v", err, empty)
	}
}
