package awsclient

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
)

// TestRetryerRetriesThrottling checks that the retryer every client gets
// retries DynamoDB's throttling errors, up to MaxAttempts, within the
// backoff bounds.
func TestRetryerRetriesThrottling(t *testing.T) {
	r := newRetryer()
	if r.MaxAttempts() != MaxAttempts {
		t.Fatalf("MaxAttempts = %d, want %d", r.MaxAttempts(), MaxAttempts)
	}
	for _, code := range []string{"ProvisionedThroughputExceededException", "ThrottlingException", "LimitExceededException", "RequestLimitExceeded"} {
		err := &smithy.GenericAPIError{Code: code, Fault: smithy.FaultClient}
		if !r.IsErrorRetryable(err) {
			t.Errorf("%s is not retried", code)
		}
	}
	if r.IsErrorRetryable(&smithy.GenericAPIError{Code: "ConditionalCheckFailedException"}) {
		t.Error("a failed condition is retried")
	}
	for attempt := 1; attempt < 40; attempt++ {
		d, err := r.RetryDelay(attempt, errors.New("x"))
		if err != nil || d <= 0 || d > MaxBackoff {
			t.Fatalf("RetryDelay(%d) = %v, %v", attempt, d, err)
		}
	}
	var _ aws.Retryer = r
}
