// Package dynamo is the DynamoDB adapter of the persistence port: a
// store.Store on one DynamoDB table (see README "Table design"), a reader of
// the table's stream that turns stream records into store.Changes (for a
// poller, and as a store.FeedReader for tests), the same conversion for the
// records Lambda receives, and a call counter for request budgets.
//
// Item attributes. Every item has pk and sk (S, the table key) and version
// (N), and type (S) and data (B) unless they are empty; data of 512 bytes
// or more is stored compressed as dataz (B, raw DEFLATE) instead when that
// is smaller, since DynamoDB charges writes per 1 KB of item. For every index
// gsiN in store.Indexes that the item belongs to it also has gsiN_pk and
// gsiN_sk (S); the attributes are absent when the item is not in the index,
// which keeps the global secondary indexes sparse. CreateTable makes a table
// of this shape.
//
// Commits. One write is one PutItem, UpdateItem or DeleteItem with a
// condition expression; several writes are one TransactWriteItems. Versions
// are assigned without reading: a conditional create writes version 1, a
// compare-and-set against version v writes v+1, and a blind (unconditional)
// put is an UpdateItem that SETs every attribute, REMOVEs the index
// attributes the new item lacks and ADDs 1 to version.
//
// Where DynamoDB is weaker than the port (and than the embedded adapter):
// Get and table queries read consistently (so lookup indexes, whose entries
// are table items, do too), but an index query reads a GSI,
// which DynamoDB updates asynchronously (a commit may take a moment to show
// there); and the stream is written after the commit, not in the same step,
// so a change reaches StreamReader or Lambda shortly after Commit returns.
//
// Files: dynamo.go reads (Get, Query), commit.go writes, codec.go the item
// attributes, table.go creates and checks the table, stream.go converts
// stream records to changes, streamreader.go reads the stream (the local
// AWS mode's poller), counter.go counts calls.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/store"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// ErrClosed is returned (wrapped) by every operation on a closed Store.
var ErrClosed = errors.New("dynamo: store closed")

// ErrCorrupt is returned (wrapped) when an item or stream record read from
// DynamoDB lacks an attribute of the adapter's layout or holds one of the
// wrong type; it indicates a table written by something else, or a bug.
var ErrCorrupt = errors.New("dynamo: corrupt item")

// Store is the DynamoDB adapter. It implements store.Store and is safe for
// concurrent use. It holds no state besides the client and the table name,
// so any number of Stores (in any number of processes) may share a table.
type Store struct {
	client *dynamodb.Client
	table  string
	closed atomic.Bool
}

var _ store.Store = (*Store)(nil)

// New returns a Store on table, which must have the layout CreateTable
// makes. It makes no call; a nil client or empty table name makes every
// operation fail with an error rather than panic. The Store does not own the
// client.
func New(client *dynamodb.Client, table string) *Store {
	return &Store{client: client, table: table}
}

// LookupEntriesApart reports true: store.Update writes lookup entries in
// single writes around an item's commit rather than in its transaction,
// where each would cost twice (store.EntriesApart).
func (s *Store) LookupEntriesApart() bool { return true }

// Close marks the Store closed; the client is left alone. It always returns
// nil. After Close every operation returns an error wrapping ErrClosed.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

// begin checks that the store is usable and ctx is live.
func (s *Store) begin(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.client == nil || s.table == "" {
		return errors.New("dynamo: store has no client or table")
	}
	return ctx.Err()
}

// apiErr wraps an error of the SDK, adding store.ErrInvalid to a
// ValidationException (DynamoDB refused the request's shape).
func apiErr(op string, err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" {
		return fmt.Errorf("dynamo: %s: %w: %w", op, store.ErrInvalid, err)
	}
	return fmt.Errorf("dynamo: %s: %w", op, err)
}

// checkKey validates a table or index key: the size limits, and UTF-8 (a
// DynamoDB string must be valid UTF-8).
func checkKey(k store.Key) error {
	if err := store.CheckKey(k); err != nil {
		return fmt.Errorf("dynamo: %w", err)
	}
	if !utf8.ValidString(k.PK) || !utf8.ValidString(k.SK) {
		return invalidf("key %q|%q is not valid UTF-8", k.PK, k.SK)
	}
	return nil
}

// Get returns the item under key, read with ConsistentRead (one GetItem).
// It returns an error wrapping store.ErrNotFound when there is none,
// store.ErrInvalid for a key outside the limits or not valid UTF-8,
// ErrCorrupt for an item not in the adapter's layout, ErrClosed after Close,
// ctx.Err() when ctx is done before the call, and the SDK's error (wrapped)
// when the call fails.
func (s *Store) Get(ctx context.Context, key store.Key) (store.Item, error) {
	if err := s.begin(ctx); err != nil {
		return store.Item{}, err
	}
	if err := checkKey(key); err != nil {
		return store.Item{}, err
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            keyAttrs(key),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return store.Item{}, apiErr("get", err)
	}
	if len(out.Item) == 0 {
		return store.Item{}, fmt.Errorf("dynamo: get %s: %w", key, store.ErrNotFound)
	}
	it, err := decodeItem(out.Item)
	if err != nil {
		return store.Item{}, fmt.Errorf("dynamo: get %s: %w", key, err)
	}
	if it.Expired(time.Now()) {
		// TTL deletes within days; until then the item is as absent.
		return store.Item{}, fmt.Errorf("dynamo: get %s: %w", key, store.ErrNotFound)
	}
	return it, nil
}

// Query returns one page of the items of partition q.PK in the table or in
// index q.Index, in sort-key order (reversed when q.Descending). A zero Limit
// means store.DefaultLimit, and a Limit above store.MaxLimit is lowered to it. Next is
// set only when more items follow, so a page behaves like the embedded
// adapter's: the adapter asks DynamoDB for one item more than it returns,
// and keeps querying while DynamoDB returns short pages (GSI pages and 1 MB
// pages can hold fewer items than asked) until the page is full or the
// partition ends. Table queries read consistently; index queries read the
// GSI, which is eventually consistent in DynamoDB.
//
// It returns an error wrapping store.ErrInvalid for an empty, oversized or
// non-UTF-8 PK or sort-key bound, an unknown index, a negative Limit, or a
// malformed After token (one not issued for this partition and index);
// ErrCorrupt for an item not in the adapter's layout; ErrClosed after Close;
// ctx.Err() when ctx is done before the first call; and the SDK's error
// (wrapped) when a call fails.
func (s *Store) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if err := s.begin(ctx); err != nil {
		return store.Page{}, err
	}
	pkAttr, skAttr := attrPK, attrSK
	if q.Index != "" {
		if indexSlot(q.Index) < 0 {
			return store.Page{}, invalidf("unknown index %q", q.Index)
		}
		pkAttr, skAttr = indexPKAttr(q.Index), indexSKAttr(q.Index)
	}
	if q.PK == "" || len(q.PK) > store.MaxPKBytes || !utf8.ValidString(q.PK) {
		return store.Page{}, invalidf("query partition key must be UTF-8 of 1 to %d bytes", store.MaxPKBytes)
	}
	if len(q.SKPrefix) > store.MaxSKBytes || len(q.SKUpTo) > store.MaxSKBytes ||
		!utf8.ValidString(q.SKPrefix) || !utf8.ValidString(q.SKUpTo) {
		return store.Page{}, invalidf("query sort key bounds must be UTF-8 of at most %d bytes", store.MaxSKBytes)
	}
	limit := q.Limit
	switch {
	case limit < 0:
		return store.Page{}, invalidf("negative query limit %d", limit)
	case limit == 0:
		limit = store.DefaultLimit
	case limit > store.MaxLimit:
		limit = store.MaxLimit
	}
	var start map[string]types.AttributeValue
	if q.After != "" {
		var err error
		if start, err = decodeToken(q.After, q.Index, q.PK); err != nil {
			return store.Page{}, err
		}
	}

	names := map[string]string{"#pk": pkAttr}
	values := map[string]types.AttributeValue{":pk": attrS(q.PK)}
	cond := "#pk = :pk"
	// DynamoDB allows one sort-key condition. A prefix and an upper bound
	// together are one range: strings with prefix P form the interval
	// [P, succ(P)), so with bound U the range is [P, U] when U begins with
	// P, all of the prefix when U > P otherwise, and nothing when U < P.
	prefix, upTo := q.SKPrefix, q.SKUpTo
	switch {
	case prefix != "" && upTo != "":
		switch {
		case strings.HasPrefix(upTo, prefix):
			names["#sk"] = skAttr
			values[":lo"], values[":hi"] = attrS(prefix), attrS(upTo)
			cond += " AND #sk BETWEEN :lo AND :hi"
		case upTo > prefix:
			names["#sk"] = skAttr
			values[":pre"] = attrS(prefix)
			cond += " AND begins_with(#sk, :pre)"
		default:
			return store.Page{}, nil
		}
	case prefix != "":
		names["#sk"] = skAttr
		values[":pre"] = attrS(prefix)
		cond += " AND begins_with(#sk, :pre)"
	case upTo != "":
		names["#sk"] = skAttr
		values[":hi"] = attrS(upTo)
		cond += " AND #sk <= :hi"
	}

	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ScanIndexForward:          aws.Bool(!q.Descending),
	}
	if q.Index != "" {
		in.IndexName = aws.String(string(q.Index))
	} else {
		in.ConsistentRead = aws.Bool(true)
	}
	var page store.Page
	now := time.Now()
	ask := limit + 1
	for {
		in.ExclusiveStartKey = start
		// Each round asks for a full page and one at least, twice as many
		// as the round before: items past their expiry that Time to Live
		// has not yet deleted are left out here, and asking for only the
		// few missing ones would cost a round trip per one or two of them.
		in.Limit = aws.Int32(int32(ask))
		ask = min(2*ask, store.MaxLimit+1)
		out, err := s.client.Query(ctx, in)
		if err != nil {
			return store.Page{}, apiErr("query", err)
		}
		for _, raw := range out.Items {
			var it store.Item
			if q.Index != "" {
				it, err = decodeEntry(raw, q.Index)
			} else {
				it, err = decodeItem(raw)
			}
			if err != nil {
				return store.Page{}, fmt.Errorf("dynamo: query: %w", err)
			}
			if it.Expired(now) {
				continue // as absent (an index entry's item is read by current)
			}
			page.Items = append(page.Items, it)
		}
		if len(page.Items) > limit {
			page.Items = page.Items[:limit]
			page.Next = encodeToken(page.Items[limit-1], q.Index)
			break
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	if q.Index != "" {
		items, err := s.current(ctx, q.Index, page.Items)
		if err != nil {
			return store.Page{}, err
		}
		page.Items = items
	}
	return page, nil
}

// decodeEntry decodes an index entry of a keys-only GSI: the table key and
// the index key, nothing else.
func decodeEntry(m map[string]types.AttributeValue, index store.IndexName) (store.Item, error) {
	var it store.Item
	var k store.IndexKey
	var err error
	if it.PK, err = getS(m, attrPK, true); err != nil {
		return store.Item{}, err
	}
	if it.SK, err = getS(m, attrSK, true); err != nil {
		return store.Item{}, err
	}
	if k.PK, err = getS(m, indexPKAttr(index), true); err != nil {
		return store.Item{}, err
	}
	if k.SK, err = getS(m, indexSKAttr(index), true); err != nil {
		return store.Item{}, err
	}
	it.Index = map[store.IndexName]store.IndexKey{index: k}
	return it, nil
}

// current reads the items that index entries name (consistent GetItems,
// several at a time) and returns, in the entries' order, those that still
// carry the entry's key in index: the GSIs project keys only, so an index
// query is a read of the index followed by a read of each item, and an
// item that left the entry's place since the index was read is left out,
// as the embedded adapter, whose indexes are never behind, would not
// return it either.
func (s *Store) current(ctx context.Context, index store.IndexName, entries []store.Item) ([]store.Item, error) {
	got := make([]*store.Item, len(entries))
	errs := make([]error, len(entries))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			it, err := s.Get(ctx, e.Key)
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				errs[i] = err
			default:
				got[i] = &it
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("dynamo: query: %w", err)
	}
	out := make([]store.Item, 0, len(entries))
	for i, e := range entries {
		if got[i] != nil && got[i].Index[index] == e.Index[index] {
			out = append(out, *got[i])
		}
	}
	return out, nil
}
