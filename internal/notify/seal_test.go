package notify

import (
	"os"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/alert"
)

// TestSealAgentMatchesInfra: the API function may open only channel
// secrets (its kms:Decrypt is conditioned on the encryption context's
// agent being sealAgent, infra.ChannelSealAgent); the two must agree.
func TestSealAgentMatchesInfra(t *testing.T) {
	b, err := os.ReadFile("../../infra/api.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `const ChannelSealAgent = "`+sealAgent+`"`) {
		t.Fatalf("infra.ChannelSealAgent is not %q", sealAgent)
	}
}

// TestAlarmCoversEveryChannelType: the stack's dead-notifications alarm
// sums one metric per channel type (infra.NotificationChannelTypes).
func TestAlarmCoversEveryChannelType(t *testing.T) {
	b, err := os.ReadFile("../../infra/observability.go")
	if err != nil {
		t.Fatal(err)
	}
	var quoted []string
	for _, ty := range alert.Types {
		quoted = append(quoted, `"`+string(ty)+`"`)
	}
	if !strings.Contains(string(b), "var NotificationChannelTypes = []string{"+strings.Join(quoted, ", ")+"}") {
		t.Fatalf("infra.NotificationChannelTypes is not %v", alert.Types)
	}
}
