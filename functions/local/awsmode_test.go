package main

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
)

// TestAWSModeKeepsCredentials: the local AWS mode, run against the emulator
// without CREDENTIALS_KEY_ID, creates the KMS key that seals outbound
// credentials (alias/<table>-credentials), as it creates the table and
// queues, so a credentials PUT is served at once rather than a 503; a
// second start (which finds the key by its alias rather than creating
// another) still serves them.
func TestAWSModeKeepsCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the AWS mode runs against the emulator in the full run")
	}
	endpoint := dynamotest.Start(t)
	t.Setenv("CREDENTIALS_KEY_ID", "")
	os.Unsetenv("CREDENTIALS_KEY_ID")
	bin := buildServer(t)
	table := fmt.Sprintf("local-kms-%d", time.Now().UnixNano())
	args := []string{"-aws-endpoint", endpoint, "-table", table, "-schedule-group", table, "-data", t.TempDir()}
	ag := a2atest.NewAgent(t, "1.0")
	ag.Require(a2atest.Bearer("bearer", func(tok string) bool { return tok == "sealed-token" }))

	s := startServer(t, bin, args...)
	if code, b := s.call(t, "PUT", "/v1/agents/agent-1", ag.Card()); code != 200 {
		t.Fatalf("card: %d %s", code, b)
	}
	if code, b := s.call(t, "PUT", "/v1/agents/agent-1/credentials", map[string]any{"credentials": map[string]any{"bearer": map[string]any{"token": "sealed-token"}}}); code != 200 {
		t.Fatalf("credentials PUT in the local AWS mode: %d %s", code, b)
	}
	s.kill9()

	s = startServer(t, bin, args...)
	defer s.kill9()
	code, b := s.call(t, "GET", "/v1/agents/agent-1/credentials", nil)
	if code != 200 || string(b) != `{"configured":["bearer"]}`+"\n" && string(b) != `{"configured":["bearer"]}` {
		t.Fatalf("after a restart: %d %s", code, b)
	}
}
