package dynamo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/store"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

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
// An item expired at now counts as absent (store.Item.ExpiresAt): TTL
// deletes it only eventually.
func build(o op, now time.Time) request {
	r := request{names: map[string]string{}, values: map[string]types.AttributeValue{}}
	switch o.cond.Kind {
	case store.IfAbsent:
		r.condExpr = "attribute_not_exists(#pk) OR #expiresAt <= :now"
		r.names["#pk"] = attrPK
		r.names["#expiresAt"] = attrExpiresAt
		r.values[":now"] = attrN(now.Unix())
	case store.IfVersion:
		r.condExpr = "#version = :expected AND (attribute_not_exists(#expiresAt) OR #expiresAt > :now)"
		r.names["#version"] = attrVersion
		r.values[":expected"] = attrN(o.cond.Version)
		r.names["#expiresAt"] = attrExpiresAt
		r.values[":now"] = attrN(now.Unix())
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
		add(attrExpiresAt)
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
	r := build(o, time.Now())
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
			rand.Read(token) // never fails (crypto/rand)
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
		r := build(o, time.Now())
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
	var err error
	for attempt := 0; ; attempt++ {
		_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems:          items,
			ClientRequestToken:     aws.String(requestToken()),
			ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes,
		})
		if err == nil {
			return nil
		}
		// A transaction cancelled because a partition it writes is
		// throttled is retried like any throttle (the SDK's retryer does
		// not retry a TransactionCanceledException): nothing was applied,
		// so a fresh token is safe.
		if !throttledTx(err) || attempt >= MaxThrottledTxAttempts-1 {
			break
		}
		if err := sleepCtx(ctx, txBackoff(attempt)); err != nil {
			return err
		}
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

// MaxThrottledTxAttempts bounds the attempts of a transaction that
// DynamoDB keeps cancelling for throttling (ThrottlingError,
// ProvisionedThroughputExceeded), about 6 s of backoff in all.
const MaxThrottledTxAttempts = 10

// throttledTx reports whether err is a transaction cancelled for
// throttling alone: some reason is ThrottlingError or
// ProvisionedThroughputExceeded, and none is a condition, a conflict or a
// validation error (which a retry would not change, or which Update
// handles).
func throttledTx(err error) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	throttled := false
	for _, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "ThrottlingError", "ProvisionedThroughputExceeded":
			throttled = true
		case "ConditionalCheckFailed", "TransactionConflict", "ValidationError", "ItemCollectionSizeLimitExceeded":
			return false
		}
	}
	return throttled
}

// txBackoff is the wait before retry attempt+1 of a throttled transaction:
// exponential from 25 ms, capped at 1 s, with full jitter (AWS's advice
// for retries, so throttled callers spread out).
func txBackoff(attempt int) time.Duration {
	ceiling := min(time.Second, 25*time.Millisecond<<attempt)
	return time.Duration(mrand.Int64N(int64(ceiling)) + 1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
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
func requestToken() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}
