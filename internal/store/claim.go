package store

import (
	"context"
	"errors"
	"time"
)

// TypeClaim is the type of the marker items Claim writes.
const TypeClaim = "claim"

// ClaimMargin is what a claim on an attempt holds beyond the attempt's own
// bound (its send or judge call): the time to record the outcome.
const ClaimMargin = 30 * time.Second

// Claim takes the claim named by key for the duration hold, across
// processes: it creates a marker item under key unless an unexpired one is
// there, and reports whether this caller now holds the claim. Work that
// duplicate deliveries may start in several processes at once (sending
// one lapse task or notification, calling the judge for one attempt) is
// claimed first, so that one of them
// does it; a holder that dies frees the claim when it expires. The marker
// is never removed early: it expires after hold (by the wall clock, which
// is what stores expire items by; rounded up to the second), and the store
// deletes it some time after (TTL on DynamoDB, the expirer embedded).
// Errors are the store's.
func Claim(ctx context.Context, s Store, key Key, hold time.Duration) (bool, error) {
	until := time.Now().Add(hold)
	expires := until.Unix()
	if until.Nanosecond() > 0 {
		expires++
	}
	err := s.Commit(ctx, []Write{PutIfAbsent(Item{Key: key, Type: TypeClaim, Data: []byte(`{}`), ExpiresAt: expires})})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrConflict):
		return false, nil
	default:
		return false, err
	}
}
