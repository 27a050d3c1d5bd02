package credentials

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// KMSAPI is the part of the KMS client the KMS sealer calls.
type KMSAPI interface {
	GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, opts ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error)
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
	out, err := k.Client.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{
		KeyId: aws.String(k.KeyID), KeySpec: kmstypes.DataKeySpecAes256,
		EncryptionContext: kmsContext(agentID, scheme),
	})
	if err != nil {
		return nil, fmt.Errorf("credentials: KMS GenerateDataKey: %w", err)
	}
	defer clear(out.Plaintext)
	if len(out.CiphertextBlob) > 0xffff {
		return nil, errors.New("credentials: KMS data key too long")
	}
	aead, err := NewAESGCM(out.Plaintext)
	if err != nil {
		return nil, err
	}
	body, err := aead.Seal(ctx, plaintext, agentID, scheme)
	if err != nil {
		return nil, err
	}
	sealed := binary.BigEndian.AppendUint16(nil, uint16(len(out.CiphertextBlob)))
	sealed = append(sealed, out.CiphertextBlob...)
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
	out, err := k.Client.Decrypt(ctx, &kms.DecryptInput{
		CiphertextBlob: sealed[2 : 2+n], KeyId: aws.String(k.KeyID),
		EncryptionContext: kmsContext(agentID, scheme),
	})
	if err != nil {
		return nil, fmt.Errorf("credentials: KMS Decrypt: %w", err)
	}
	defer clear(out.Plaintext)
	aead, err := NewAESGCM(out.Plaintext)
	if err != nil {
		return nil, err
	}
	return aead.Open(ctx, sealed[2+n:], agentID, scheme)
}
