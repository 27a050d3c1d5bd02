package dynamo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/dynamo"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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

// TestQueryOverExpiredItems: a page of a partition that holds many items
// past their expiry which Time to Live has not deleted yet (it takes up to
// days) costs a few Query calls, not one per one or two of them (found by
// a second tenant's probe: 151 calls for 300).
func TestQueryOverExpiredItems(t *testing.T) {
	var counter dynamo.Counter
	db, _ := dynamotest.NewClients(dynamotest.Start(t), dynamo.CountingMiddleware(&counter))
	table := dynamotest.NewTable(t, db, "ttlq-")
	if _, err := db.UpdateTimeToLive(ctxT(t), &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expiresAt"), Enabled: aws.Bool(false)}}); err != nil {
		t.Fatal(err)
	}
	s := dynamo.New(db, table)
	past := time.Now().Add(-time.Minute).Unix()
	var writes []store.Write
	writes = append(writes, store.PutIfAbsent(store.Item{Key: store.Key{PK: "p", SK: "a"}, Type: "t"}))
	for i := range 300 {
		writes = append(writes, store.PutIfAbsent(store.Item{Key: store.Key{PK: "p", SK: fmt.Sprintf("b%04d", i)}, Type: "t", ExpiresAt: past}))
	}
	writes = append(writes, store.PutIfAbsent(store.Item{Key: store.Key{PK: "p", SK: "c"}, Type: "t"}))
	for len(writes) > 0 {
		n := min(len(writes), 25)
		mustCommit(t, s, writes[:n]...)
		writes = writes[n:]
	}
	counter.Reset()
	p, err := s.Query(ctxT(t), store.Query{PK: "p", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 2 || p.Items[0].SK != "a" || p.Items[1].SK != "c" || p.Next != "" {
		t.Fatalf("page %+v, next %q; want a and c, the last page", p.Items, p.Next)
	}
	if n := counter.Count("Query"); n > 10 {
		t.Fatalf("%d Query calls for a page of 2 behind 300 expired items", n)
	}
}
