package dynamo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/dynamo"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
	"github.com/agentclock/clockwork/internal/store/storetest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

func TestMain(m *testing.M) {
	_, stop, _ := dynamotest.StartMain() // tests report a failure to start
	code := m.Run()
	stop()
	os.Exit(code)
}

// clients returns the shared clients for the test binary's emulator.
func clients(t testing.TB) (*dynamodb.Client, *dynamodbstreams.Client) {
	t.Helper()
	return dynamotest.NewClients(dynamotest.Start(t))
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newStore returns a Store on a fresh table.
func newStore(t *testing.T) store.Store {
	db, _ := clients(t)
	s := dynamo.New(db, dynamotest.NewTable(t, db, "contract-"))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// feedStore is a Store with the reader of its table's stream.
type feedStore struct {
	*dynamo.Store
	*dynamo.StreamReader
}

func (f feedStore) Close() error { return errors.Join(f.Store.Close(), f.StreamReader.Close()) }

func newFeedStore(t *testing.T) store.Store {
	db, st := clients(t)
	table := dynamotest.NewTable(t, db, "feed-")
	arn, err := dynamo.StreamARN(ctxT(t), db, table)
	if err != nil {
		t.Fatal(err)
	}
	f := feedStore{dynamo.New(db, table), dynamo.NewStreamReader(st, arn, dynamo.StreamOptions{PollInterval: 100 * time.Millisecond})}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func TestContract(t *testing.T) { storetest.Run(t, newStore) }

func TestFeedContract(t *testing.T) { storetest.RunFeed(t, newFeedStore) }

func item(pk, sk, data string) store.Item {
	return store.Item{Key: store.Key{PK: pk, SK: sk}, Type: "test", Data: []byte(data)}
}

func mustCommit(t testing.TB, s store.Store, writes ...store.Write) {
	t.Helper()
	if err := s.Commit(ctxT(t), writes); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func mustGet(t testing.TB, s store.Store, k store.Key) store.Item {
	t.Helper()
	it, err := s.Get(ctxT(t), k)
	if err != nil {
		t.Fatalf("Get(%s): %v", k, err)
	}
	return it
}

func readN(t testing.TB, it store.Item) int {
	t.Helper()
	var v struct{ N int }
	if err := json.Unmarshal(it.Data, &v); err != nil {
		t.Fatalf("%s data %q: %v", it.Key, it.Data, err)
	}
	return v.N
}

func dataN(n int) string { return fmt.Sprintf(`{"n":%d}`, n) }

// TestTransactConcurrentWriter checks the TransactWriteItems path against a
// writer that changes an item between an Update's read and its commit: the
// commit fails as a ConflictError naming the write, and store.Update
// retries on fresh reads to the right result.
func TestTransactConcurrentWriter(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	a := store.Key{PK: "acct", SK: "a"}
	b := store.Key{PK: "acct", SK: "b"}
	mustCommit(t, s, store.PutIfAbsent(item(a.PK, a.SK, dataN(100))), store.PutIfAbsent(item(b.PK, b.SK, dataN(0))))

	// A direct transaction on a stale version names the stale write.
	err := s.Commit(ctx, []store.Write{
		store.PutIfVersion(item(b.PK, b.SK, dataN(1)), 1),
		store.PutIfVersion(item(a.PK, a.SK, dataN(99)), 7),
	})
	var ce *store.ConflictError
	if !errors.Is(err, store.ErrConflict) || !errors.As(err, &ce) || ce.Index != 1 || ce.Key != a {
		t.Fatalf("stale transaction: %v, want ConflictError{1, %s}", err, a)
	}

	// A writer slips in between the first attempt's reads and its commit.
	var attempts atomic.Int32
	transfer := func(tx *store.Tx) error {
		ia, _, err := tx.Get(ctx, a)
		if err != nil {
			return err
		}
		ib, _, err := tx.Get(ctx, b)
		if err != nil {
			return err
		}
		if attempts.Add(1) == 1 {
			cur := mustGet(t, s, a)
			mustCommit(t, s, store.PutIfVersion(item(a.PK, a.SK, dataN(readN(t, cur)+50)), cur.Version))
		}
		tx.Put(item(a.PK, a.SK, dataN(readN(t, ia)-10)))
		tx.Put(item(b.PK, b.SK, dataN(readN(t, ib)+10)))
		return nil
	}
	if err := store.Update(ctx, s, transfer); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if n := attempts.Load(); n != 2 {
		t.Fatalf("Update ran fn %d times, want 2 (one conflict)", n)
	}
	if ga, gb := mustGet(t, s, a), mustGet(t, s, b); readN(t, ga) != 140 || readN(t, gb) != 10 || ga.Version != 3 || gb.Version != 2 {
		t.Fatalf("after transfer: a=%s v%d b=%s v%d, want a=140 v3 b=10 v2", ga.Data, ga.Version, gb.Data, gb.Version)
	}

	// Many transfers (transactions) race single-item deposits.
	const transferers, depositors, each = 4, 2, 8
	var wg sync.WaitGroup
	errs := make(chan error, transferers+depositors)
	for w := range transferers + depositors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				err := store.Update(context.Background(), s, func(tx *store.Tx) error {
					ia, _, err := tx.Get(ctx, a)
					if err != nil {
						return err
					}
					var v struct{ N int }
					if err := json.Unmarshal(ia.Data, &v); err != nil {
						return err
					}
					if w < depositors {
						tx.Put(item(a.PK, a.SK, dataN(v.N+1)))
						return nil
					}
					ib, _, err := tx.Get(ctx, b)
					if err != nil {
						return err
					}
					var u struct{ N int }
					if err := json.Unmarshal(ib.Data, &u); err != nil {
						return err
					}
					tx.Put(item(a.PK, a.SK, dataN(v.N-1)))
					tx.Put(item(b.PK, b.SK, dataN(u.N+1)))
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Update: %v", err)
	}
	wantA := 140 - transferers*each + depositors*each
	wantB := 10 + transferers*each
	if ga, gb := mustGet(t, s, a), mustGet(t, s, b); readN(t, ga) != wantA || readN(t, gb) != wantB {
		t.Fatalf("after the race: a=%s b=%s, want a=%d b=%d", ga.Data, gb.Data, wantA, wantB)
	}
}

// fakeDynamo serves canned DynamoDB error answers on loopback, for errors
// the emulator never produces (it serializes requests).
func fakeDynamo(t *testing.T, status int, body string) (*dynamodb.Client, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var targets []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		targets = append(targets, r.Header.Get("X-Amz-Target"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	db, _ := dynamotest.NewClients(srv.URL)
	return dynamodb.New(db.Options(), func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }), &targets
}

func TestTransactionConflictIsAConflict(t *testing.T) {
	ctx := ctxT(t)
	a, b := item("p", "a", `{}`), item("p", "b", `{}`)

	db, targets := fakeDynamo(t, 400, `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException",`+
		`"Message":"Transaction cancelled","CancellationReasons":[{"Code":"None"},{"Code":"TransactionConflict","Message":"Transaction is ongoing for the item"}]}`)
	err := dynamo.New(db, "t").Commit(ctx, []store.Write{store.PutIfAbsent(a), store.PutIfVersion(b, 3)})
	var ce *store.ConflictError
	if !errors.As(err, &ce) || ce.Index != 1 || ce.Key != b.Key {
		t.Fatalf("cancelled transaction: %v, want ConflictError{1, %s}", err, b.Key)
	}
	if len(*targets) != 1 || !strings.HasSuffix((*targets)[0], ".TransactWriteItems") {
		t.Fatalf("calls %q, want one TransactWriteItems", *targets)
	}

	// A condition failure is named before a concurrent transaction.
	db, _ = fakeDynamo(t, 400, `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException",`+
		`"Message":"x","CancellationReasons":[{"Code":"TransactionConflict"},{"Code":"ConditionalCheckFailed"}]}`)
	err = dynamo.New(db, "t").Commit(ctx, []store.Write{store.PutIfAbsent(a), store.PutIfVersion(b, 3)})
	if !errors.As(err, &ce) || ce.Index != 1 {
		t.Fatalf("cancelled transaction: %v, want ConflictError{1}", err)
	}

	db, _ = fakeDynamo(t, 400, `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionConflictException","message":"busy"}`)
	err = dynamo.New(db, "t").Commit(ctx, []store.Write{store.PutIfAbsent(a)})
	if !errors.As(err, &ce) || ce.Index != 0 || ce.Key != a.Key {
		t.Fatalf("single write in a transaction's way: %v, want ConflictError{0}", err)
	}

	// Other cancellations are errors, not conflicts.
	db, _ = fakeDynamo(t, 400, `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException",`+
		`"Message":"x","CancellationReasons":[{"Code":"None"},{"Code":"ThrottlingError"}]}`)
	err = dynamo.New(db, "t").Commit(ctx, []store.Write{store.PutIfAbsent(a), store.PutIfVersion(b, 3)})
	if err == nil || errors.Is(err, store.ErrConflict) {
		t.Fatalf("throttled transaction: %v, want a non-conflict error", err)
	}
}

func TestCallCounter(t *testing.T) {
	var counter dynamo.Counter
	db, st := dynamotest.NewClients(dynamotest.Start(t), dynamo.CountingMiddleware(&counter))
	table := dynamotest.NewTable(t, db, "count-")
	s := dynamo.New(db, table)
	ctx := ctxT(t)
	counter.Reset()

	a := item("p", "a", `{}`)
	mustCommit(t, s, store.PutIfAbsent(a))                                              // PutItem
	mustCommit(t, s, store.PutIfVersion(a, 1), store.PutIfAbsent(item("p", "b", `{}`))) // TransactWriteItems
	mustCommit(t, s, store.Write{Put: &a})                                              // UpdateItem
	mustCommit(t, s, store.Write{Delete: &a.Key})                                       // DeleteItem
	if _, err := s.Get(ctx, a.Key); !errors.Is(err, store.ErrNotFound) {                // GetItem
		t.Fatalf("Get = %v", err)
	}
	if _, err := s.Query(ctx, store.Query{PK: "p"}); err != nil { // Query
		t.Fatal(err)
	}
	if err := s.Commit(ctx, []store.Write{store.PutIfAbsent(item("p", "b", `{}`))}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("conflicting create = %v", err) // PutItem, refused
	}
	want := map[string]int{"PutItem": 2, "TransactWriteItems": 1, "UpdateItem": 1, "DeleteItem": 1, "GetItem": 1, "Query": 1}
	if got := counter.Snapshot(); fmt.Sprint(got) != fmt.Sprint(want) || counter.Total() != 7 {
		t.Fatalf("calls %v (total %d), want %v", got, counter.Total(), want)
	}

	arn, err := dynamo.StreamARN(ctx, db, table)
	if err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	r := dynamo.NewStreamReader(st, arn, dynamo.StreamOptions{})
	defer r.Close()
	chs, err := r.ReadFeed(ctx, 100)
	if err != nil || len(chs) != 5 {
		t.Fatalf("ReadFeed = %d changes, %v; want 5", len(chs), err)
	}
	if c := counter.Count("DescribeStream"); c != 1 {
		t.Fatalf("DescribeStream calls %d, want 1", c)
	}
	if c := counter.Count("GetShardIterator"); c != 1 {
		t.Fatalf("GetShardIterator calls %d, want 1 per shard", c)
	}
	if c := counter.Count("GetRecords"); c < 1 || c > 2 {
		t.Fatalf("GetRecords calls %d, want 1 or 2", c)
	}
}

func TestBlindPutIndexesAndImages(t *testing.T) {
	s := newFeedStore(t).(feedStore)
	ctx := ctxT(t)
	k := store.Key{PK: "p", SK: "a"}
	withIx := item(k.PK, k.SK, `{"n":1}`)
	withIx.Index = map[store.IndexName]store.IndexKey{store.GSI2: {PK: "g", SK: "1"}, store.GSI5: {PK: "h", SK: "1"}}
	mustCommit(t, s, store.Write{Put: &withIx})
	plain := item(k.PK, k.SK, ``)
	plain.Index = map[store.IndexName]store.IndexKey{store.GSI5: {PK: "h", SK: "2"}}
	mustCommit(t, s, store.Write{Put: &plain})

	got := mustGet(t, s, k)
	if got.Version != 2 || len(got.Data) != 0 || len(got.Index) != 1 || got.Index[store.GSI5] != (store.IndexKey{PK: "h", SK: "2"}) {
		t.Fatalf("after blind overwrite: %+v", got)
	}
	for _, q := range []store.Query{{Index: store.GSI2, PK: "g"}} {
		if page, err := s.Query(ctx, q); err != nil || len(page.Items) != 0 {
			t.Fatalf("Query(%+v) = %+v, %v; want no item", q, page, err)
		}
	}
	if page, err := s.Query(ctx, store.Query{Index: store.GSI5, PK: "h"}); err != nil || len(page.Items) != 1 || page.Items[0].Index[store.GSI5].SK != "2" {
		t.Fatalf("gsi5 = %+v, %v", page, err)
	}
	chs, err := s.ReadFeed(ctx, 10)
	if err != nil || len(chs) != 2 {
		t.Fatalf("ReadFeed = %+v, %v", chs, err)
	}
	if chs[0].Old != nil || chs[0].New.Version != 1 || chs[1].Old.Version != 1 || chs[1].New.Version != 2 ||
		chs[1].Old.Index[store.GSI2].PK != "g" || !chs[1].New.Index[store.GSI2].IsZero() {
		t.Fatalf("changes of blind puts: %+v / %+v %+v", chs[0], chs[1].Old, chs[1].New)
	}

	// A blind put of an item with no type, data or index keys.
	bare := store.Item{Key: store.Key{PK: "p", SK: "bare"}}
	mustCommit(t, s, store.Write{Put: &bare})
	mustCommit(t, s, store.Write{Put: &bare})
	if got := mustGet(t, s, bare.Key); got.Version != 2 || got.Type != "" || got.Data != nil || got.Index != nil {
		t.Fatalf("bare item after two blind puts: %+v", got)
	}
}

// TestQueryShortPages makes DynamoDB end pages at its 1 MB limit, before the
// Limit, and checks that a page is still filled to the Limit.
func TestQueryShortPages(t *testing.T) {
	s := newStore(t)
	big := strings.Repeat("x", 300*1024)
	var writes []store.Write
	for i := range 5 {
		it := item("p", fmt.Sprint(i), `"`+big+`"`)
		it.Index = map[store.IndexName]store.IndexKey{store.GSI1: {PK: "g", SK: "same"}}
		writes = append(writes, store.PutIfAbsent(it))
	}
	for _, w := range writes {
		mustCommit(t, s, w)
	}
	for _, q := range []store.Query{{PK: "p", Limit: 4}, {Index: store.GSI1, PK: "g", Limit: 4}} {
		page, err := s.Query(ctxT(t), q)
		if err != nil || len(page.Items) != 4 || page.Next == "" {
			t.Fatalf("Query(%v) = %d items, Next %q, %v; want 4 and a Next", q.Index, len(page.Items), page.Next, err)
		}
		q.After = page.Next
		page, err = s.Query(ctxT(t), q)
		if err != nil || len(page.Items) != 1 || page.Next != "" {
			t.Fatalf("second page = %d items, Next %q, %v; want the last one", len(page.Items), page.Next, err)
		}
	}
}

func TestCreateTable(t *testing.T) {
	db, _ := clients(t)
	ctx := ctxT(t)
	table := dynamotest.NewTable(t, db, "create-")
	if err := dynamo.CreateTable(ctx, db, table); err != nil {
		t.Fatalf("CreateTable again: %v", err)
	}
	other := table + "-other"
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(other),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(other)})
	if err := dynamo.CreateTable(ctx, db, other); err == nil || !strings.Contains(err.Error(), "key") {
		t.Fatalf("CreateTable over another layout = %v, want an error", err)
	}
	// A table of the layout before lookup entries (with gsi4) is refused.
	old := table + "-old"
	gsi := func(name string) types.GlobalSecondaryIndex {
		return types.GlobalSecondaryIndex{IndexName: aws.String(name), Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
			KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(name + "_pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String(name + "_sk"), KeyType: types.KeyTypeRange}}}
	}
	var defs []types.AttributeDefinition
	var gsis []types.GlobalSecondaryIndex
	for _, n := range []string{"pk", "sk"} {
		defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS})
	}
	for _, n := range []string{"gsi1", "gsi2", "gsi4", "gsi5"} {
		defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(n + "_pk"), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: aws.String(n + "_sk"), AttributeType: types.ScalarAttributeTypeS})
		gsis = append(gsis, gsi(n))
	}
	_, err = db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(old), AttributeDefinitions: defs, GlobalSecondaryIndexes: gsis, BillingMode: types.BillingModePayPerRequest,
		KeySchema:           []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(old)})
	if err := dynamo.CreateTable(ctx, db, old); err == nil || !strings.Contains(err.Error(), "gsi4") {
		t.Fatalf("CreateTable over the earlier layout = %v, want an error naming gsi4", err)
	}
	// A table whose indexes project ALL (before keys-only indexes) is refused.
	all := table + "-all"
	defs, gsis = defs[:2], nil
	for _, n := range []string{"gsi1", "gsi2", "gsi5"} {
		defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(n + "_pk"), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: aws.String(n + "_sk"), AttributeType: types.ScalarAttributeTypeS})
		gsis = append(gsis, gsi(n))
	}
	_, err = db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(all), AttributeDefinitions: defs, GlobalSecondaryIndexes: gsis, BillingMode: types.BillingModePayPerRequest,
		KeySchema:           []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(all)})
	if err := dynamo.CreateTable(ctx, db, all); err == nil || !strings.Contains(err.Error(), "KEYS_ONLY") {
		t.Fatalf("CreateTable over indexes projecting ALL = %v, want an error naming KEYS_ONLY", err)
	}
}

func TestInvalid(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	bad := item("p\xff", "a", `{}`)
	if err := s.Commit(ctx, []store.Write{store.PutIfAbsent(bad)}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("non-UTF-8 key: %v, want ErrInvalid", err)
	}
	huge := item("p", "a", strings.Repeat("x", store.MaxItemBytes))
	if err := s.Commit(ctx, []store.Write{store.PutIfAbsent(huge)}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("oversized item: %v, want ErrInvalid", err)
	}
	if _, err := s.Query(ctx, store.Query{PK: "p", Limit: -1}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("negative limit: %v, want ErrInvalid", err)
	}
	_ = s.Close()
	if _, err := s.Get(ctx, store.Key{PK: "p", SK: "a"}); !errors.Is(err, dynamo.ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}
}

// lambdaEvent is a DynamoDB stream event as Lambda delivers it: a MODIFY that
// moves an item out of gsi1, and a REMOVE.
const lambdaEvent = `{"Records":[
 {"eventID":"1","eventName":"MODIFY","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"us-east-1",
  "dynamodb":{"ApproximateCreationDateTime":1767225600,
   "Keys":{"pk":{"S":"A#agent"},"sk":{"S":"E#e1"}},
   "OldImage":{"pk":{"S":"A#agent"},"sk":{"S":"E#e1"},"type":{"S":"expectation"},"version":{"N":"3"},
     "data":{"B":"eyJzdGF0ZSI6Im9wZW4ifQ=="},"gsi1_pk":{"S":"FK#agent#k"},"gsi1_sk":{"S":"e1"},
     "gsi2_pk":{"S":"SU#agent#t#1"},"gsi2_sk":{"S":"open#e1"}},
   "NewImage":{"pk":{"S":"A#agent"},"sk":{"S":"E#e1"},"type":{"S":"expectation"},"version":{"N":"4"},
     "data":{"B":"eyJzdGF0ZSI6Im1ldCJ9"},"gsi2_pk":{"S":"SU#agent#t#1"},"gsi2_sk":{"S":"met#e1"},
     "extra":{"M":{"l":{"L":[{"BOOL":true},{"NULL":true},{"NS":["1","2"]}]}}}},
   "SequenceNumber":"4421584500000000017450439091","SizeBytes":512,"StreamViewType":"NEW_AND_OLD_IMAGES"},
  "eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/clockwork/stream/2026-01-01T00:00:00.000"},
 {"eventID":"2","eventName":"REMOVE","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"us-east-1",
  "dynamodb":{"Keys":{"pk":{"S":"A#agent"},"sk":{"S":"S#t#1"}},
   "OldImage":{"pk":{"S":"A#agent"},"sk":{"S":"S#t#1"},"type":{"S":"subject"},"version":{"N":"1"}},
   "SequenceNumber":"4421584600000000017450439092","SizeBytes":80,"StreamViewType":"NEW_AND_OLD_IMAGES"},
  "eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/clockwork/stream/2026-01-01T00:00:00.000"}
]}`

// TestDataCompressed: data of 512 bytes or more is stored deflated (dataz)
// when that is smaller, read back as given, and a later put of small data
// (conditional or blind) stores it plain and removes dataz; the size bound
// applies to the data as given.
func TestDataCompressed(t *testing.T) {
	db, _ := clients(t)
	table := dynamotest.NewTable(t, db, "deflate-")
	s := dynamo.New(db, table)
	ctx := ctxT(t)
	raw := func(k store.Key) map[string]types.AttributeValue {
		t.Helper()
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: k.PK}, "sk": &types.AttributeValueMemberS{Value: k.SK}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	big := `{"text":"` + strings.Repeat("the same words again and again ", 100) + `"}`
	it := item("p", "a", big)
	mustCommit(t, s, store.PutIfAbsent(it))
	m := raw(it.Key)
	if _, plain := m["data"]; plain || m["dataz"] == nil {
		t.Fatalf("stored attributes %v: want dataz and no data", slices.Collect(maps.Keys(m)))
	}
	if z := m["dataz"].(*types.AttributeValueMemberB).Value; len(z) >= len(big)/4 {
		t.Fatalf("dataz holds %d bytes of %d", len(z), len(big))
	}
	if got := mustGet(t, s, it.Key); string(got.Data) != big {
		t.Fatalf("read back %q", got.Data)
	}
	for _, w := range []store.Write{store.PutIfVersion(item("p", "a", `{"small":1}`), 1), {Put: &store.Item{Key: it.Key, Type: "test", Data: []byte(`{"small":2}`)}}} {
		mustCommit(t, s, w)
		m = raw(it.Key)
		if _, z := m["dataz"]; z || m["data"] == nil {
			t.Fatalf("after a small put, stored attributes %v: want data and no dataz", slices.Collect(maps.Keys(m)))
		}
	}
	mustCommit(t, s, store.Write{Put: &store.Item{Key: it.Key, Type: "test", Data: []byte(big)}})
	if m = raw(it.Key); m["data"] != nil || m["dataz"] == nil {
		t.Fatalf("after a blind big put, stored attributes %v: want dataz only", slices.Collect(maps.Keys(m)))
	}
	if got := mustGet(t, s, it.Key); string(got.Data) != big {
		t.Fatalf("read back %q", got.Data)
	}
	huge := item("p", "h", `"`+strings.Repeat("x", store.MaxItemBytes)+`"`)
	if err := s.Commit(ctx, []store.Write{store.PutIfAbsent(huge)}); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("an item over the bound that compresses small: %v, want ErrTooLarge", err)
	}
}
