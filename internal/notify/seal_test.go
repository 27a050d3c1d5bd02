package notify

import (
	"os"
	"strings"
	"testing"
)

// TestSealAgentMatchesInfra: the API function may open only channel
// secrets (its kms:Decrypt is conditioned on the encryption context's
// agent being sealAgent, infra.ChannelSealAgent); the two must agree.
func TestSealAgentMatchesInfra(t *testing.T) {
	b, err := os.ReadFile("../../infra/resources.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `const ChannelSealAgent = "`+sealAgent+`"`) {
		t.Fatalf("infra.ChannelSealAgent is not %q", sealAgent)
	}
}
