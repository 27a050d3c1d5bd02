package awsclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
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
	cfg    aws.Config
	signer *v4.Signer
}

// NewSQSSender returns a sender with the credentials, region and HTTP
// client of cfg.
func NewSQSSender(cfg aws.Config) *SQSSender {
	return &SQSSender{cfg: cfg, signer: v4.NewSigner()}
}

// sqsAttempts bounds the sender's attempts of one call.
const sqsAttempts = 3

// SendMessage sends body to the queue at queueURL, invisible for
// delaySeconds (0 to 900). The error wraps SQS's (a smithy.APIError) or the
// transport's, after the retries.
func (s *SQSSender) SendMessage(ctx context.Context, queueURL, body string, delaySeconds int32) error {
	u, err := url.Parse(queueURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("sqs: queue URL %q is not an absolute URL", queueURL)
	}
	payload, err := json.Marshal(struct {
		QueueURL     string `json:"QueueUrl"`
		MessageBody  string `json:"MessageBody"`
		DelaySeconds int32  `json:"DelaySeconds"`
	}{queueURL, body, delaySeconds})
	if err != nil {
		return err
	}
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err = s.send(ctx, u.Scheme+"://"+u.Host+"/", payload)
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

func (s *SQSSender) send(ctx context.Context, endpoint string, payload []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
	sum := sha256.Sum256(payload)
	creds, err := s.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("sqs: credentials: %w", err)
	}
	if err := s.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "sqs", s.cfg.Region, time.Now()); err != nil {
		return fmt.Errorf("sqs: sign: %w", err)
	}
	var client interface {
		Do(*http.Request) (*http.Response, error)
	} = http.DefaultClient
	if s.cfg.HTTPClient != nil {
		client = s.cfg.HTTPClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return &transportError{err}
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		var ok struct {
			MessageID string `json:"MessageId"`
		}
		if json.Unmarshal(answer, &ok) != nil || ok.MessageID == "" {
			return fmt.Errorf("sqs: SendMessage answered %d without a MessageId: %.200s", resp.StatusCode, answer)
		}
		return nil
	}
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
		Msg     string `json:"Message"`
	}
	_ = json.Unmarshal(answer, &e)
	code := e.Type[strings.LastIndex(e.Type, "#")+1:]
	if code == "" {
		code = http.StatusText(resp.StatusCode)
	}
	fault := smithy.FaultClient
	if resp.StatusCode >= 500 {
		fault = smithy.FaultServer
	}
	return &smithy.GenericAPIError{Code: code, Message: e.Message + e.Msg, Fault: fault}
}

// transportError is a request that got no answer.
type transportError struct{ err error }

func (e *transportError) Error() string { return "sqs: " + e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

func retryable(err error) bool {
	var te *transportError
	if errors.As(err, &te) {
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
