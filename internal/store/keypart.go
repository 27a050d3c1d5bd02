package store

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

var keyEscaper = strings.NewReplacer("%", "%25", "#", "%23")

// maxKeyPart bounds one escaped key component; a longer one is replaced by
// a digest, so every key stays within DynamoDB's limits (PK 2048 bytes, SK
// 1024) whatever ids and fact keys clients send. Lookups never rely on the
// key alone: records are compared field by field after they are read.
const maxKeyPart = 200

// KeyPart escapes one client-supplied component of a key, so that '#'
// separates components unambiguously. The digest form of a long component
// starts with "%H", which escaping never produces, so it cannot collide
// with an escaped value.
func KeyPart(s string) string {
	e := keyEscaper.Replace(s)
	if len(e) <= maxKeyPart {
		return e
	}
	sum := sha256.Sum256([]byte(s))
	return "%H" + hex.EncodeToString(sum[:])
}
