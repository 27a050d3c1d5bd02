package bolt

import (
	"path/filepath"
	"testing"

	"github.com/agentclock/clockwork/internal/credentials"
	"github.com/agentclock/clockwork/internal/credentials/credentialstest"
)

// TestCredentialsContract stores sealed credentials in the embedded store
// with the key-file sealer of the embedded default.
func TestCredentialsContract(t *testing.T) {
	sealer, err := credentials.KeyFile(filepath.Join(t.TempDir(), "credentials-aes256.key"))
	if err != nil {
		t.Fatal(err)
	}
	credentialstest.Run(t, newStore, sealer)
}
