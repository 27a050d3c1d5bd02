package dynamo_test

import (
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
	client := kms.NewFromConfig(dynamotest.Config(endpoint))
	key, err := client.CreateKey(ctxT(t), &kms.CreateKeyInput{})
	if err != nil {
		t.Fatalf("KMS CreateKey on the emulator: %v", err)
	}
	credentialstest.Run(t, newStore, &credentials.KMS{Client: client, KeyID: *key.KeyMetadata.KeyId})
}
