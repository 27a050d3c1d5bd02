package credentials

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/agentclock/clockwork/internal/awsclient/awsjson"
	"github.com/aws/aws-sdk-go-v2/aws"
)

// KMSAPI is what the KMS sealer asks of AWS KMS.
type KMSAPI interface {
	// GenerateDataKey returns a fresh AES-256 data key in clear and as
	// encrypted under keyID with the encryption context.
	GenerateDataKey(ctx context.Context, keyID string, encryptionContext map[string]string) (plaintext, ciphertext []byte, err error)
	// Decrypt returns the data key encrypted in ciphertext; KMS refuses it
	// under another key or encryption context.
	Decrypt(ctx context.Context, keyID string, ciphertext []byte, encryptionContext map[string]string) ([]byte, error)
}

// KMS seals by envelope encryption: each Seal asks KMS for a fresh AES-256
// data key (GenerateDataKey) under KeyID, encrypts locally with AES-256-GCM
// and keeps only the data key as KMS encrypted it; Open asks KMS to decrypt
// that key (Decrypt). The agent id and scheme are the KMS encryption
// context and the GCM associated data, so KMS refuses a key presented for
// another agent or scheme, and CloudTrail records which agent's secret was
// opened. (Envelope rather than Encrypt: a client certificate and key in
// PEM exceed KMS Encrypt's 4 KiB.) So a process that may only
// GenerateDataKey (the API function) can seal but never open.
type KMS struct {
	Client KMSAPI
	KeyID  string
}

func kmsContext(agentID, scheme string) map[string]string {
	return map[string]string{"clockwork:agent": agentID, "clockwork:scheme": scheme}
}

// Seal implements Sealer. The format is a 2-byte big-endian length, the
// encrypted data key, then the AES-256-GCM nonce and ciphertext.
func (k *KMS) Seal(ctx context.Context, plaintext []byte, agentID, scheme string) ([]byte, error) {
	key, blob, err := k.Client.GenerateDataKey(ctx, k.KeyID, kmsContext(agentID, scheme))
	if err != nil {
		return nil, fmt.Errorf("credentials: KMS GenerateDataKey: %w", err)
	}
	defer clear(key)
	if len(blob) > 0xffff {
		return nil, errors.New("credentials: KMS data key too long")
	}
	aead, err := NewAESGCM(key)
	if err != nil {
		return nil, err
	}
	body, err := aead.Seal(ctx, plaintext, agentID, scheme)
	if err != nil {
		return nil, err
	}
	sealed := binary.BigEndian.AppendUint16(nil, uint16(len(blob)))
	sealed = append(sealed, blob...)
	return append(sealed, body...), nil
}

// Open implements Sealer.
func (k *KMS) Open(ctx context.Context, sealed []byte, agentID, scheme string) ([]byte, error) {
	if len(sealed) < 2 {
		return nil, errors.New("credentials: sealed value too short")
	}
	n := int(binary.BigEndian.Uint16(sealed))
	if len(sealed) < 2+n {
		return nil, errors.New("credentials: sealed value too short")
	}
	key, err := k.Client.Decrypt(ctx, k.KeyID, sealed[2:2+n], kmsContext(agentID, scheme))
	if err != nil {
		return nil, fmt.Errorf("credentials: KMS Decrypt: %w", err)
	}
	defer clear(key)
	aead, err := NewAESGCM(key)
	if err != nil {
		return nil, err
	}
	return aead.Open(ctx, sealed[2+n:], agentID, scheme)
}

// KMSClient calls the two KMS operations the sealer needs over KMS's
// JSON 1.1 protocol (POST with X-Amz-Target: TrentService.<Operation>),
// signed with the SDK's Signature Version 4 signer and the configuration's
// credentials, region, endpoint and HTTP client. It stands in for the
// SDK's generated KMS client, which would add about 1.3 MB to every Lambda
// binary (the functions' size budget is 20 MiB); it makes one attempt per
// call (the outbox and the API's callers retry).
type KMSClient struct {
	Config aws.Config
}

// KMSError is an error answered by KMS (its HTTP status, code and message,
// which never hold key material).
type KMSError = awsjson.APIError

// call sends one operation and decodes its answer into out. The error is a
// *KMSError for KMS's answer, else the transport's.
func (c *KMSClient) call(ctx context.Context, op string, in, out any) error {
	endpoint := aws.ToString(c.Config.BaseEndpoint)
	if endpoint == "" {
		suffix := "amazonaws.com"
		if strings.HasPrefix(c.Config.Region, "cn-") {
			suffix = "amazonaws.com.cn"
		}
		endpoint = "https://kms." + c.Config.Region + "." + suffix
	}
	return awsjson.Do(ctx, c.Config, awsjson.Call{Service: "kms", Endpoint: endpoint,
		ContentType: "application/x-amz-json-1.1", Target: "TrentService." + op}, in, out)
}

// GenerateDataKey implements KMSAPI.
func (c *KMSClient) GenerateDataKey(ctx context.Context, keyID string, encryptionContext map[string]string) ([]byte, []byte, error) {
	var out struct {
		Plaintext      []byte
		CiphertextBlob []byte
	}
	err := c.call(ctx, "GenerateDataKey", map[string]any{"KeyId": keyID, "KeySpec": "AES_256", "EncryptionContext": encryptionContext}, &out)
	if err != nil {
		return nil, nil, err
	}
	if len(out.Plaintext) != 32 || len(out.CiphertextBlob) == 0 {
		return nil, nil, errors.New("KMS answered no AES-256 data key")
	}
	return out.Plaintext, out.CiphertextBlob, nil
}

// Decrypt implements KMSAPI.
func (c *KMSClient) Decrypt(ctx context.Context, keyID string, ciphertext []byte, encryptionContext map[string]string) ([]byte, error) {
	var out struct{ Plaintext []byte }
	err := c.call(ctx, "Decrypt", map[string]any{"KeyId": keyID, "CiphertextBlob": ciphertext, "EncryptionContext": encryptionContext}, &out)
	if err != nil {
		return nil, err
	}
	return out.Plaintext, nil
}

// EnsureKey returns the id of the symmetric KMS key named alias
// ("alias/..."), creating the key and the alias when there is none: the
// local AWS mode's way to a key on LocalStack or moto, as it creates the
// table and queues (a deployment's key comes from the stack). Errors are
// KMS's or the transport's.
func (c *KMSClient) EnsureKey(ctx context.Context, alias string) (string, error) {
	var found struct{ KeyMetadata struct{ KeyId string } }
	err := c.call(ctx, "DescribeKey", map[string]any{"KeyId": alias}, &found)
	if err == nil && found.KeyMetadata.KeyId != "" {
		return found.KeyMetadata.KeyId, nil
	}
	var ke *KMSError
	if err != nil && !(errors.As(err, &ke) && ke.Code == "NotFoundException") {
		return "", err
	}
	var created struct{ KeyMetadata struct{ KeyId string } }
	if err := c.call(ctx, "CreateKey", map[string]any{"KeySpec": "SYMMETRIC_DEFAULT", "KeyUsage": "ENCRYPT_DECRYPT",
		"Description": "clockwork outbound credentials (created by the local AWS mode)"}, &created); err != nil {
		return "", err
	}
	if err := c.call(ctx, "CreateAlias", map[string]any{"AliasName": alias, "TargetKeyId": created.KeyMetadata.KeyId}, &struct{}{}); err != nil {
		// Another process created the alias meanwhile: use its key.
		if errors.As(err, &ke) && ke.Code == "AlreadyExistsException" {
			return c.EnsureKey(ctx, alias)
		}
		return "", err
	}
	return created.KeyMetadata.KeyId, nil
}
