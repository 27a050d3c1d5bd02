package dynamo

import (
	"context"
	"maps"
	"sync"

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
