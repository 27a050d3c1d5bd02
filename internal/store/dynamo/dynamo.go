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
package dynamo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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
	for {
		in.ExclusiveStartKey = start
		in.Limit = aws.Int32(int32(limit - len(page.Items) + 1))
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

// op is one validated write.
type op struct {
	idx   int
	key   store.Key
	cond  store.Cond
	put   *store.Item // a private copy; nil for a delete or check
	check bool        // a condition check: nothing is written
}

// prepare validates writes.
func prepare(writes []store.Write) ([]op, error) {
	if err := store.CheckWrites(writes); err != nil {
		return nil, err
	}
	ops := make([]op, len(writes))
	for i, w := range writes {
		key := w.Key()
		if err := checkKey(key); err != nil {
			return nil, fmt.Errorf("write %d: %w", i, err)
		}
		o := op{idx: i, key: key, cond: w.Cond, check: w.Check != nil}
		if w.Put != nil {
			it := *w.Put
			it.Index = nil
			if !utf8.ValidString(it.Type) {
				return nil, invalidf("write %d: type is not valid UTF-8", i)
			}
			for name, ixk := range w.Put.Index {
				if !knownIndex(name) {
					return nil, invalidf("write %d: unknown index %q", i, name)
				}
				if ixk.IsZero() {
					continue
				}
				if err := checkKey(store.Key(ixk)); err != nil {
					return nil, fmt.Errorf("write %d: index %s: %w", i, name, err)
				}
				if it.Index == nil {
					it.Index = make(map[store.IndexName]store.IndexKey, len(w.Put.Index))
				}
				it.Index[name] = ixk
			}
			// The bound applies to the data as given, not as stored
			// compressed: both adapters refuse the same items.
			if size := itemSize(encodeAttrs(&it, 1<<62, false)); size > store.MaxItemBytes {
				return nil, fmt.Errorf("dynamo: write %d: item of %d bytes exceeds %d: %w", i, size, store.MaxItemBytes, store.ErrTooLarge)
			}
			o.put = &it
		}
		ops[i] = o
	}
	return ops, nil
}

// request is one write as DynamoDB parameters: a put (item set), an update
// (updateExpr set) or a delete, each with its condition.
type request struct {
	item       map[string]types.AttributeValue // PutItem
	key        map[string]types.AttributeValue // UpdateItem, DeleteItem
	updateExpr string
	condExpr   string
	names      map[string]string
	values     map[string]types.AttributeValue
}

// build turns o into DynamoDB parameters, assigning the version read-free.
func build(o op) request {
	r := request{names: map[string]string{}, values: map[string]types.AttributeValue{}}
	switch o.cond.Kind {
	case store.IfAbsent:
		r.condExpr = "attribute_not_exists(#pk)"
		r.names["#pk"] = attrPK
	case store.IfVersion:
		r.condExpr = "#version = :expected"
		r.names["#version"] = attrVersion
		r.values[":expected"] = attrN(o.cond.Version)
	}
	switch {
	case o.put == nil: // a delete or a check
		r.key = keyAttrs(o.key)
	case o.cond.Kind == store.IfAbsent:
		r.item = itemAttrs(o.put, 1)
	case o.cond.Kind == store.IfVersion:
		r.item = itemAttrs(o.put, o.cond.Version+1)
	default:
		// A blind put: the version it replaces is unknown, so the write is
		// an update that adds one to it (creating it at 1).
		r.key = keyAttrs(o.key)
		attrs := itemAttrs(o.put, 0)
		var set, remove []string
		add := func(name string) {
			ph := "#" + name
			r.names[ph] = name
			if v, ok := attrs[name]; ok {
				r.values[":"+name] = v
				set = append(set, ph+" = :"+name)
			} else {
				remove = append(remove, ph)
			}
		}
		add(attrType)
		add(attrData)
		add(attrDataDeflate)
		for _, name := range keyedNames {
			add(indexPKAttr(name))
			add(indexSKAttr(name))
		}
		r.names["#version"] = attrVersion
		r.values[":one"] = attrN(1)
		r.updateExpr = "ADD #version :one"
		if len(set) > 0 {
			r.updateExpr = "SET " + strings.Join(set, ", ") + " " + r.updateExpr
		}
		if len(remove) > 0 {
			r.updateExpr += " REMOVE " + strings.Join(remove, ", ")
		}
	}
	if len(r.names) == 0 {
		r.names = nil
	}
	if len(r.values) == 0 {
		r.values = nil
	}
	return r
}

// Commit applies writes atomically: one write with one conditional
// PutItem/UpdateItem/DeleteItem, several (or any condition check, a
// ConditionCheck) with one TransactWriteItems, whose
// ClientRequestToken is fresh for each Commit and reused by the SDK's
// retries of it, so a retried transaction is applied at most once. A
// conditional PutItem carries a random token of the call (attribute wt) and
// asks for the item that fails its condition, so an SDK retry whose earlier
// attempt was applied (its answer lost) finds its own token and succeeds
// instead of reporting a conflict. A conditional DeleteItem retried that way
// still reports one (the item is gone; Update then re-reads). Versions
// are assigned here (1 on create, +1 per put) without reading. A delete of
// an absent item (allowed when its condition holds) changes nothing and
// leaves no stream record. An empty commit is a no-op.
//
// It returns a *store.ConflictError (matching store.ErrConflict) naming the
// first write whose condition failed; when DynamoDB cancels a transaction for
// a concurrent transaction on one of its items (TransactionConflict), or
// refuses a single write for one (TransactionConflictException), the
// ConflictError names that write, so store.Update retries. It returns an
// error wrapping store.ErrInvalid when there are more than
// store.MaxCommitWrites writes, two writes of one key, a write with neither
// or both of Put and Delete, an unknown condition kind or index, a key
// outside the size limits or not valid UTF-8 (table and index keys alike), a
// type that is not valid UTF-8, an item over store.MaxItemBytes, or when DynamoDB
// answers ValidationException; ErrClosed after Close; ctx.Err() when ctx is
// done before the call; and the SDK's error (wrapped) for any other failure,
// after which the commit may or may not have been applied (as with any
// timeout).
func (s *Store) Commit(ctx context.Context, writes []store.Write) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if len(writes) == 0 {
		return nil
	}
	ops, err := prepare(writes)
	if err != nil {
		return err
	}
	if len(ops) == 1 && !ops[0].check {
		return s.commitOne(ctx, ops[0])
	}
	return s.commitTx(ctx, ops)
}

func (s *Store) commitOne(ctx context.Context, o op) error {
	r := build(o)
	table := aws.String(s.table)
	var err error
	switch {
	case r.item != nil:
		in := &dynamodb.PutItemInput{
			TableName: table, Item: r.item, ConditionExpression: optString(r.condExpr),
			ExpressionAttributeNames: r.names, ExpressionAttributeValues: r.values,
			ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes,
		}
		var token []byte
		if r.condExpr != "" {
			token = make([]byte, 8)
			if _, err := rand.Read(token); err != nil {
				return err
			}
			r.item[attrWriteToken] = &types.AttributeValueMemberB{Value: token}
			in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		}
		_, err = s.client.PutItem(ctx, in)
		if token != nil && wroteBefore(err, token) {
			return nil
		}
	case r.updateExpr != "":
		_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: table, Key: r.key, UpdateExpression: aws.String(r.updateExpr),
			ConditionExpression:      optString(r.condExpr),
			ExpressionAttributeNames: r.names, ExpressionAttributeValues: r.values,
			ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes,
		})
	default:
		_, err = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: table, Key: r.key, ConditionExpression: optString(r.condExpr),
			ExpressionAttributeNames: r.names, ExpressionAttributeValues: r.values,
			ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes,
		})
	}
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	var tc *types.TransactionConflictException
	if errors.As(err, &ccf) || errors.As(err, &tc) {
		return &store.ConflictError{Index: o.idx, Key: o.key}
	}
	return apiErr("commit", err)
}

// wroteBefore reports whether err is a condition failure against the item
// this call's token wrote: an earlier attempt of the same PutItem (the SDK
// retries one whose answer was lost: a timeout, a connection reset, an
// HTTP 500, after which DynamoDB says the request may have succeeded) was
// applied, and the retry found its result. A concurrent writer's item has
// another token (or none), so a real conflict stays one.
func wroteBefore(err error, token []byte) bool {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return false
	}
	b, ok := ccf.Item[attrWriteToken].(*types.AttributeValueMemberB)
	return ok && bytes.Equal(b.Value, token)
}

func (s *Store) commitTx(ctx context.Context, ops []op) error {
	table := aws.String(s.table)
	items := make([]types.TransactWriteItem, len(ops))
	for i, o := range ops {
		r := build(o)
		cond := optString(r.condExpr)
		switch {
		case o.check:
			items[i].ConditionCheck = &types.ConditionCheck{TableName: table, Key: keyAttrs(o.key), ConditionExpression: cond,
				ExpressionAttributeNames: r.names, ExpressionAttributeValues: r.values}
		case r.item != nil:
			items[i].Put = &types.Put{TableName: table, Item: r.item, ConditionExpression: cond,
				ExpressionAttributeNames: r.names, ExpressionAttributeValues: r.values}
		case r.updateExpr != "":
			items[i].Update = &types.Update{TableName: table, Key: r.key, UpdateExpression: aws.String(r.updateExpr),
				ConditionExpression: cond, ExpressionAttributeNames: r.names, ExpressionAttributeValues: r.values}
		default:
			items[i].Delete = &types.Delete{TableName: table, Key: r.key, ConditionExpression: cond,
				ExpressionAttributeNames: r.names, ExpressionAttributeValues: r.values}
		}
	}
	token, err := requestToken()
	if err != nil {
		return fmt.Errorf("dynamo: commit: %w", err)
	}
	_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:          items,
		ClientRequestToken:     aws.String(token),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes,
	})
	if err == nil {
		return nil
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		if i := cancelledIndex(tce.CancellationReasons, "ConditionalCheckFailed"); i >= 0 && i < len(ops) {
			return &store.ConflictError{Index: ops[i].idx, Key: ops[i].key}
		}
		if i := cancelledIndex(tce.CancellationReasons, "TransactionConflict"); i >= 0 && i < len(ops) {
			return &store.ConflictError{Index: ops[i].idx, Key: ops[i].key}
		}
		if cancelledIndex(tce.CancellationReasons, "ValidationError") >= 0 {
			return fmt.Errorf("dynamo: commit: %w: %w", store.ErrInvalid, err)
		}
	}
	return apiErr("commit", err)
}

// cancelledIndex returns the position of the first reason with code, or -1.
func cancelledIndex(reasons []types.CancellationReason, code string) int {
	for i, r := range reasons {
		if aws.ToString(r.Code) == code {
			return i
		}
	}
	return -1
}

// requestToken returns a fresh ClientRequestToken (at most 36 characters).
// It is random rather than derived from the writes: two Commits with equal
// writes (two workers computing the same compare-and-set) are two requests,
// and DynamoDB would apply only the first of two within ten minutes that
// share a token and parameters.
func requestToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}

// ---- table ----

// CreateTable creates table with the layout the adapter needs: key pk (HASH,
// S) and sk (RANGE, S), on-demand billing (PAY_PER_REQUEST), a stream with
// NEW_AND_OLD_IMAGES, and one global secondary index per name in
// store.Indexes, keyed NAME_pk (HASH) and NAME_sk (RANGE) and projecting
// only the keys (KEYS_ONLY: Query reads each item itself). It then waits
// until the table and its indexes are ACTIVE,
// polling DescribeTable until ctx is done. A table that already exists is
// accepted (the call is idempotent) when it has that key schema, those
// indexes and a stream with both images.
//
// It returns ctx.Err() (wrapped) when ctx ends before the table is active, an
// error naming the difference when an existing table has another layout, and
// the SDK's error (wrapped) when a call fails.
func CreateTable(ctx context.Context, client *dynamodb.Client, table string) error {
	if client == nil || table == "" {
		return errors.New("dynamo: create table: no client or table name")
	}
	defs := []types.AttributeDefinition{
		{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
		{AttributeName: aws.String(attrSK), AttributeType: types.ScalarAttributeTypeS},
	}
	var gsis []types.GlobalSecondaryIndex
	for _, name := range indexNames {
		pk, sk := indexPKAttr(name), indexSKAttr(name)
		defs = append(defs,
			types.AttributeDefinition{AttributeName: aws.String(pk), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: aws.String(sk), AttributeType: types.ScalarAttributeTypeS},
		)
		gsis = append(gsis, types.GlobalSecondaryIndex{
			IndexName: aws.String(string(name)),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		})
	}
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: defs,
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
		BillingMode:            types.BillingModePayPerRequest,
		GlobalSecondaryIndexes: gsis,
		StreamSpecification: &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: types.StreamViewTypeNewAndOldImages,
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("dynamo: create table %s: %w", table, err)
	}
	return waitActive(ctx, client, table)
}

// waitActive polls DescribeTable until table and its indexes are ACTIVE, and
// checks its layout.
func waitActive(ctx context.Context, client *dynamodb.Client, table string) error {
	delay := 50 * time.Millisecond
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		var notFound *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &notFound) {
			return fmt.Errorf("dynamo: create table %s: %w", table, err)
		}
		if err == nil {
			if err := checkLayout(out.Table); err != nil {
				return fmt.Errorf("dynamo: create table %s: %w", table, err)
			}
			if active(out.Table) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dynamo: create table %s: waiting for ACTIVE: %w", table, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}

func active(t *types.TableDescription) bool {
	if t.TableStatus != types.TableStatusActive {
		return false
	}
	for _, g := range t.GlobalSecondaryIndexes {
		if g.IndexStatus != "" && g.IndexStatus != types.IndexStatusActive {
			return false
		}
	}
	return true
}

// checkLayout reports how an existing table differs from what CreateTable
// makes, in the parts the adapter relies on.
func checkLayout(t *types.TableDescription) error {
	keyOf := func(ks []types.KeySchemaElement) (hash, rng string) {
		for _, k := range ks {
			switch k.KeyType {
			case types.KeyTypeHash:
				hash = aws.ToString(k.AttributeName)
			case types.KeyTypeRange:
				rng = aws.ToString(k.AttributeName)
			}
		}
		return hash, rng
	}
	if h, r := keyOf(t.KeySchema); h != attrPK || r != attrSK {
		return fmt.Errorf("existing table has key %s/%s, want %s/%s", h, r, attrPK, attrSK)
	}
	for _, g := range t.GlobalSecondaryIndexes {
		if n := aws.ToString(g.IndexName); n == "gsi3" || n == "gsi4" {
			return fmt.Errorf("existing table has index %s: it has the layout of an earlier version (no lookup entries) and there is no migration; use a new table", n)
		}
	}
	for _, name := range indexNames {
		found := false
		for _, g := range t.GlobalSecondaryIndexes {
			if aws.ToString(g.IndexName) != string(name) {
				continue
			}
			found = true
			if h, r := keyOf(g.KeySchema); h != indexPKAttr(name) || r != indexSKAttr(name) {
				return fmt.Errorf("existing index %s has key %s/%s", name, h, r)
			}
			if g.Projection == nil || g.Projection.ProjectionType != types.ProjectionTypeKeysOnly {
				return fmt.Errorf("existing index %s does not project KEYS_ONLY (a table of an earlier version, whose indexes projected ALL: there is no migration; use a new table)", name)
			}
		}
		if !found {
			return fmt.Errorf("existing table lacks index %s", name)
		}
	}
	ss := t.StreamSpecification
	if ss == nil || !aws.ToBool(ss.StreamEnabled) || ss.StreamViewType != types.StreamViewTypeNewAndOldImages {
		return errors.New("existing table has no stream with NEW_AND_OLD_IMAGES")
	}
	return nil
}

// StreamARN returns the ARN of table's current stream (DescribeTable's
// LatestStreamArn). It returns an error when the table has no enabled
// stream, and the SDK's error (wrapped) when the call fails.
func StreamARN(ctx context.Context, client *dynamodb.Client, table string) (string, error) {
	if client == nil {
		return "", errors.New("dynamo: stream ARN: no client")
	}
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return "", fmt.Errorf("dynamo: stream ARN of %s: %w", table, err)
	}
	arn := aws.ToString(out.Table.LatestStreamArn)
	ss := out.Table.StreamSpecification
	if arn == "" || ss == nil || !aws.ToBool(ss.StreamEnabled) {
		return "", fmt.Errorf("dynamo: table %s has no enabled stream", table)
	}
	return arn, nil
}
