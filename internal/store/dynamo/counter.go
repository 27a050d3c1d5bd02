package dynamo

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Counter counts AWS API calls per operation name ("PutItem",
// "TransactWriteItems", "GetRecords", ...), for request-budget assertions.
// The zero value is ready to use; it is safe for concurrent use.
type Counter struct {
	mu    sync.Mutex
	calls map[string]int
}

// Count returns the number of calls of operation op counted so far.
func (c *Counter) Count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op]
}

// Total returns the number of calls of every operation counted so far.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}

// Snapshot returns a copy of the counts, keyed by operation name.
func (c *Counter) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.calls)
}

// Reset sets every count to zero.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = nil
}

func (c *Counter) add(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[op]++
}

// CountingMiddleware returns an API option that counts every call of a
// client's operations in counter: add it to aws.Config.APIOptions (or a
// client's Options.APIOptions) of the DynamoDB and DynamoDB Streams clients.
// A call is counted once when it starts, whatever its outcome and however
// many times the SDK's retryer sends it. The option returns an error only
// when the middleware stack refuses the middleware (a second counting
// middleware on one stack).
func CountingMiddleware(counter *Counter) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		op := stack.ID()
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("clockwork.CountCalls",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				name := middleware.GetOperationName(ctx)
				if name == "" {
					name = op
				}
				if counter != nil {
					counter.add(name)
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	}
}

// Capacity sums the write capacity units DynamoDB reports as consumed by
// write calls (ConsumedCapacity of PutItem, UpdateItem, DeleteItem and
// TransactWriteItems, which the Store asks for on every write with
// ReturnConsumedCapacity INDEXES), in total and for the table and each
// global secondary index. The zero value is ready to use; it is safe for
// concurrent use.
type Capacity struct {
	mu      sync.Mutex
	total   float64
	table   float64
	indexes map[string]float64
	calls   []string
}

// Calls returns one line per write call counted so far, in order: the
// operation and the units it consumed ("TransactWriteItems 6").
func (c *Capacity) Calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// WriteUnits returns the write units counted so far.
func (c *Capacity) WriteUnits() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Breakdown returns the write units counted so far on the table itself and
// on each global secondary index, keyed by index name.
func (c *Capacity) Breakdown() (table float64, indexes map[string]float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.table, maps.Clone(c.indexes)
}

// Reset sets every sum to zero.
func (c *Capacity) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total, c.table, c.indexes, c.calls = 0, 0, nil, nil
}

func (c *Capacity) add(op string, caps ...types.ConsumedCapacity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	units := 0.0
	for _, cc := range caps {
		units += aws.ToFloat64(cc.CapacityUnits)
	}
	c.calls = append(c.calls, op+" "+strconv.FormatFloat(units, 'f', -1, 64))
	for _, cc := range caps {
		c.total += aws.ToFloat64(cc.CapacityUnits)
		if cc.Table != nil {
			c.table += aws.ToFloat64(cc.Table.CapacityUnits)
		}
		for name, ix := range cc.GlobalSecondaryIndexes {
			if c.indexes == nil {
				c.indexes = map[string]float64{}
			}
			c.indexes[name] += aws.ToFloat64(ix.CapacityUnits)
		}
	}
}

// CapacityMiddleware returns an API option that adds the ConsumedCapacity
// of every successful write call of a DynamoDB client to capacity: add it
// to the client's APIOptions. Calls that do not ask for consumed capacity
// (ReturnConsumedCapacity NONE) report none, and so add nothing. The option
// returns an error only when the middleware stack refuses the middleware.
func CapacityMiddleware(capacity *Capacity) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("clockwork.SumCapacity",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if err != nil || capacity == nil {
					return out, md, err
				}
				switch r := out.Result.(type) {
				case *dynamodb.PutItemOutput:
					addOne(capacity, "PutItem", r.ConsumedCapacity)
				case *dynamodb.UpdateItemOutput:
					addOne(capacity, "UpdateItem", r.ConsumedCapacity)
				case *dynamodb.DeleteItemOutput:
					addOne(capacity, "DeleteItem", r.ConsumedCapacity)
				case *dynamodb.TransactWriteItemsOutput:
					capacity.add("TransactWriteItems", r.ConsumedCapacity...)
				case *dynamodb.BatchWriteItemOutput:
					capacity.add("BatchWriteItem", r.ConsumedCapacity...)
				}
				return out, md, err
			}), middleware.After)
	}
}

func addOne(c *Capacity, op string, cc *types.ConsumedCapacity) {
	if cc != nil {
		c.add(op, *cc)
	}
}
