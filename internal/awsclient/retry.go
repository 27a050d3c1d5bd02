package awsclient

import (
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// Retry settings of every client. DynamoDB answers throttling
// (ProvisionedThroughputExceededException, ThrottlingException; Streams:
// LimitExceededException) with HTTP 400 and expects the caller to retry
// with exponential backoff; the SDK's standard retryer classifies these as
// throttles and retries them. Its defaults (3 attempts, backoff from a
// 1 s base) suit neither a burst of throttles on a hot partition nor an
// API request's latency, so, as the earlier SDKs did for DynamoDB, calls
// get 10 attempts with full-jitter backoff from a 25 ms base, capped at
// 2 s (about 8 s in all at worst). Throttled retries still draw on the
// standard retry quota, which stops retry storms when a service is down.
const (
	MaxAttempts = 10
	BaseBackoff = 25 * time.Millisecond
	MaxBackoff  = 2 * time.Second
)

// newRetryer returns the retryer of every client (see MaxAttempts).
func newRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = MaxAttempts
		o.MaxBackoff = MaxBackoff
		o.Backoff = fullJitter{}
	})
}

// fullJitter waits a uniform time in [0, min(MaxBackoff, BaseBackoff·2^attempt)).
type fullJitter struct{}

func (fullJitter) BackoffDelay(attempt int, _ error) (time.Duration, error) {
	ceiling := MaxBackoff
	if attempt < 16 {
		ceiling = min(MaxBackoff, BaseBackoff<<attempt)
	}
	return time.Duration(rand.Int64N(int64(ceiling)) + 1), nil
}
