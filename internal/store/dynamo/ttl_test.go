package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store"
)

// TestTTLDeletionIsAnExpiredChange: an item past its ExpiresAt is deleted
// by the table's Time to Live (the emulator sweeps every second, DynamoDB
// within days), and its REMOVE record, made by the service principal
// dynamodb.amazonaws.com, reaches the feed as a Change marked Expired; a
// caller's own delete does not.
func TestTTLDeletionIsAnExpiredChange(t *testing.T) {
	f := newFeedStore(t).(feedStore)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	soon := store.Item{Key: store.Key{PK: "ttl", SK: "soon"}, Type: "rec", Data: []byte(`{}`), ExpiresAt: time.Now().Add(time.Second).Unix()}
	mine := store.Item{Key: store.Key{PK: "ttl", SK: "mine"}, Type: "rec", Data: []byte(`{}`)}
	if err := f.Commit(ctx, []store.Write{store.PutIfAbsent(soon), store.PutIfAbsent(mine)}); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(ctx, []store.Write{{Delete: &mine.Key}}); err != nil {
		t.Fatal(err)
	}
	var expired, deleted []store.Key
	for len(expired) == 0 {
		changes, err := f.ReadFeed(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range changes {
			if ch.New != nil {
				continue
			}
			if ch.Expired {
				expired = append(expired, ch.Key)
			} else {
				deleted = append(deleted, ch.Key)
			}
		}
		if len(changes) > 0 {
			if err := f.AckFeed(ctx, changes[len(changes)-1].Seq); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no TTL deletion on the stream within 60 s (deletes seen: %v)", deleted)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if len(expired) != 1 || expired[0] != soon.Key {
		t.Fatalf("expired changes %v, want [%s]", expired, soon.Key)
	}
	if len(deleted) != 1 || deleted[0] != mine.Key {
		t.Fatalf("deleted changes %v, want [%s]", deleted, mine.Key)
	}
}
