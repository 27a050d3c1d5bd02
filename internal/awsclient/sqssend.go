package awsclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/awsclient/awsjson"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
)

// SQSSender sends messages to SQS queues with SQS's JSON protocol
// (AmazonSQS.SendMessage, application/x-amz-json-1.0, SigV4 with the SDK's
// signer), written here for the one call the Lambda functions make: the SDK's
// SQS client would add about 0.65 MB to each bootstrap, over the functions'
// size budget. The request goes to the queue URL's scheme and host, which is
// SQS's endpoint for the queue's region (or the emulator's). Throttling,
// 5xx answers and transport errors are retried (3 attempts, jittered
// backoff); other errors are returned as smithy.APIError with SQS's code
// (for example QueueDoesNotExist).
type SQSSender struct {
	cfg aws.Config
}

// NewSQSSender returns a sender with the credentials, region and HTTP
// client of cfg.
func NewSQSSender(cfg aws.Config) *SQSSender {
	return &SQSSender{cfg: cfg}
}

// sqsAttempts bounds the sender's attempts of one call.
const sqsAttempts = 3

// SendMessage sends body to the queue at queueURL, invisible for
// delaySeconds (0 to 900). The error wraps SQS's (a smithy.APIError) or the
// transport's, after the retries.
func (s *SQSSender) SendMessage(ctx context.Context, queueURL, body string, delaySeconds int32) error {
	var out struct {
		MessageID string `json:"MessageId"`
	}
	err := s.call(ctx, queueURL, "SendMessage", map[string]any{"QueueUrl": queueURL, "MessageBody": body, "DelaySeconds": delaySeconds}, &out)
	if err == nil && out.MessageID == "" {
		return errors.New("sqs: SendMessage answered without a MessageId")
	}
	return err
}

// call makes one SQS call (AmazonSQS.<target>) at the scheme and host of
// queueURL, or of the configured endpoint when queueURL is empty, retrying
// as SendMessage does, and decodes the answer into out.
func (s *SQSSender) call(ctx context.Context, queueURL, target string, in, out any) error {
	endpoint := "https://sqs." + s.cfg.Region + ".amazonaws.com/"
	if s.cfg.BaseEndpoint != nil && *s.cfg.BaseEndpoint != "" {
		endpoint = strings.TrimSuffix(*s.cfg.BaseEndpoint, "/") + "/"
	}
	if queueURL != "" {
		u, err := url.Parse(queueURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return fmt.Errorf("sqs: queue URL %q is not an absolute URL", queueURL)
		}
		endpoint = u.Scheme + "://" + u.Host + "/"
	}
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.send(ctx, endpoint, target, in, out)
		if err == nil || attempt >= sqsAttempts || !retryable(err) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(backoff/2 + time.Duration(rand.Int64N(int64(backoff))))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		backoff *= 2
	}
}

func (s *SQSSender) send(ctx context.Context, endpoint, target string, in, out any) error {
	return awsjson.Do(ctx, s.cfg, awsjson.Call{Service: "sqs", Endpoint: endpoint,
		ContentType: "application/x-amz-json-1.0", Target: "AmazonSQS." + target}, in, out)
}

// The calls below serve the local AWS mode and tests only: they are
// functions, not methods, so that the Lambda bootstraps do not link them.

// SQSMessage is one received message.
type SQSMessage struct {
	MessageID     string            `json:"MessageId"`
	ReceiptHandle string            `json:"ReceiptHandle"`
	MD5OfBody     string            `json:"MD5OfBody"`
	Body          string            `json:"Body"`
	Attributes    map[string]string `json:"Attributes"`
}

// ReceiveSQS receives up to max visible messages of the queue without
// waiting (short polling), with their system attributes, hiding them for
// visibility seconds. Errors as SendMessage's.
func ReceiveSQS(ctx context.Context, s *SQSSender, queueURL string, max, visibility int32) ([]SQSMessage, error) {
	var out struct {
		Messages []SQSMessage `json:"Messages"`
	}
	err := s.call(ctx, queueURL, "ReceiveMessage", map[string]any{"QueueUrl": queueURL, "MaxNumberOfMessages": max,
		"VisibilityTimeout": visibility, "WaitTimeSeconds": 0, "AttributeNames": []string{"All"}, "MessageSystemAttributeNames": []string{"All"}}, &out)
	return out.Messages, err
}

// DeleteSQS deletes messages by receipt handle (DeleteMessageBatch, up
// to 10). An entry SQS refuses is an error naming it.
func DeleteSQS(ctx context.Context, s *SQSSender, queueURL string, receipts []string) error {
	entries := make([]map[string]string, len(receipts))
	for i, h := range receipts {
		entries[i] = map[string]string{"Id": fmt.Sprint(i), "ReceiptHandle": h}
	}
	var out struct {
		Failed []struct {
			ID      string `json:"Id"`
			Code    string `json:"Code"`
			Message string `json:"Message"`
		} `json:"Failed"`
	}
	if err := s.call(ctx, queueURL, "DeleteMessageBatch", map[string]any{"QueueUrl": queueURL, "Entries": entries}, &out); err != nil {
		return err
	}
	if len(out.Failed) > 0 {
		return fmt.Errorf("sqs: delete of message %s refused: %s %s", out.Failed[0].ID, out.Failed[0].Code, out.Failed[0].Message)
	}
	return nil
}

// CreateSQSQueue creates a queue with the given attributes, or returns the
// existing one of that name and attributes, and returns its URL and ARN.
func CreateSQSQueue(ctx context.Context, s *SQSSender, name string, attrs map[string]string) (queueURL, arn string, err error) {
	var created struct {
		QueueURL string `json:"QueueUrl"`
	}
	if err := s.call(ctx, "", "CreateQueue", map[string]any{"QueueName": name, "Attributes": attrs}, &created); err != nil {
		return "", "", fmt.Errorf("create queue %s: %w", name, err)
	}
	arn, err = SQSQueueARN(ctx, s, created.QueueURL)
	return created.QueueURL, arn, err
}

// SQSQueueARN returns the ARN of the queue at queueURL.
func SQSQueueARN(ctx context.Context, s *SQSSender, queueURL string) (string, error) {
	var got struct {
		Attributes map[string]string `json:"Attributes"`
	}
	if err := s.call(ctx, queueURL, "GetQueueAttributes", map[string]any{"QueueUrl": queueURL, "AttributeNames": []string{"QueueArn"}}, &got); err != nil {
		return "", fmt.Errorf("queue %s: %w", queueURL, err)
	}
	if got.Attributes["QueueArn"] == "" {
		return "", fmt.Errorf("queue %s has no ARN", queueURL)
	}
	return got.Attributes["QueueArn"], nil
}

func retryable(err error) bool {
	if awsjson.IsTransport(err) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "ThrottlingException", "RequestThrottled", "Throttling", "ServiceUnavailable", "InternalError", "KmsThrottled":
			return true
		}
		return api.ErrorFault() == smithy.FaultServer
	}
	return false
}
