package dynamo_test

import (
	"errors"
	"testing"

	"github.com/agentclock/clockwork/internal/credentials"
	"github.com/agentclock/clockwork/internal/credentials/credentialstest"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
	"github.com/aws/aws-sdk-go-v2/service/kms"
)

// TestCredentialsContract stores credentials sealed by KMS envelope
// encryption (moto's KMS) in DynamoDB, as on AWS.
func TestCredentialsContract(t *testing.T) {
	endpoint := dynamotest.Start(t)
	cfg := dynamotest.Config(endpoint)
	key, err := kms.NewFromConfig(cfg).CreateKey(ctxT(t), &kms.CreateKeyInput{})
	if err != nil {
		t.Fatalf("KMS CreateKey on the emulator: %v", err)
	}
	credentialstest.Run(t, newStore, &credentials.KMS{Client: &credentials.KMSClient{Config: cfg}, KeyID: *key.KeyMetadata.KeyId})
}

// TestKMSClientContext: the hand-written KMS client's data key decrypts
// under the same encryption context only (KMS, not just the GCM tag,
// refuses another agent's), and KMS errors come back typed.
func TestKMSClientContext(t *testing.T) {
	cfg := dynamotest.Config(dynamotest.Start(t))
	key, err := kms.NewFromConfig(cfg).CreateKey(ctxT(t), &kms.CreateKeyInput{})
	if err != nil {
		t.Fatalf("KMS CreateKey on the emulator: %v", err)
	}
	c := &credentials.KMSClient{Config: cfg}
	ec := map[string]string{"clockwork:agent": "a", "clockwork:scheme": "s"}
	plain, blob, err := c.GenerateDataKey(ctxT(t), *key.KeyMetadata.KeyId, ec)
	if err != nil || len(plain) != 32 {
		t.Fatalf("GenerateDataKey: %v", err)
	}
	got, err := c.Decrypt(ctxT(t), *key.KeyMetadata.KeyId, blob, ec)
	if err != nil || string(got) != string(plain) {
		t.Fatalf("Decrypt: %v", err)
	}
	_, err = c.Decrypt(ctxT(t), *key.KeyMetadata.KeyId, blob, map[string]string{"clockwork:agent": "b", "clockwork:scheme": "s"})
	var ke *credentials.KMSError
	if !errors.As(err, &ke) || ke.StatusCode != 400 {
		t.Fatalf("Decrypt under another agent's context: %v", err)
	}
	if _, _, err := c.GenerateDataKey(ctxT(t), "alias/none", ec); !errors.As(err, &ke) {
		t.Fatalf("unknown key: %v", err)
	}
}
