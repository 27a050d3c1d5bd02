package credentials

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Sealer encrypts and decrypts one scheme's secret. The agent id and scheme
// name are bound to the ciphertext (associated data, or the KMS encryption
// context), so a sealed value copied to another agent or scheme does not
// open.
type Sealer interface {
	// Seal encrypts plaintext for (agentID, scheme).
	Seal(ctx context.Context, plaintext []byte, agentID, scheme string) ([]byte, error)
	// Open decrypts what Seal returned for the same (agentID, scheme); any
	// other input is an error.
	Open(ctx context.Context, sealed []byte, agentID, scheme string) ([]byte, error)
}

// AESGCM seals with AES-256-GCM under a key held outside the store (the
// embedded default's key file).
type AESGCM struct {
	aead cipher.AEAD
}

// NewAESGCM returns a Sealer over a 32-byte key. A key of another length is
// an error.
func NewAESGCM(key []byte) (*AESGCM, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("credentials: AES-256 key must be 32 bytes, not %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &AESGCM{aead: aead}, nil
}

// KeyFile loads the AES-256 key in path (64 hex digits), creating it with
// a random key (mode 0600) on first start, like the VERIFY signing key. A
// malformed file is an error; it is never overwritten.
func KeyFile(path string) (*AESGCM, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		key, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(key) != 32 {
			return nil, fmt.Errorf("credentials key %s is malformed (want 64 hex digits)", path)
		}
		return NewAESGCM(key)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return KeyFile(path) // another process created it first
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return NewAESGCM(key)
}

// associated binds a ciphertext to its agent and scheme (NUL cannot occur
// in either: ids are validated, scheme names come from JSON keys that are
// checked against the card).
func associated(agentID, scheme string) []byte {
	return []byte("clockwork-credentials\x00" + agentID + "\x00" + scheme)
}

// Seal implements Sealer: a random 12-byte nonce followed by the GCM
// ciphertext and tag.
func (s *AESGCM) Seal(_ context.Context, plaintext []byte, agentID, scheme string) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plaintext)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return s.aead.Seal(nonce, nonce, plaintext, associated(agentID, scheme)), nil
}

// Open implements Sealer.
func (s *AESGCM) Open(_ context.Context, sealed []byte, agentID, scheme string) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n+s.aead.Overhead() {
		return nil, errors.New("credentials: sealed value too short")
	}
	out, err := s.aead.Open(nil, sealed[:n], sealed[n:], associated(agentID, scheme))
	if err != nil {
		return nil, errors.New("credentials: sealed value does not open with this key for this agent and scheme")
	}
	return out, nil
}
