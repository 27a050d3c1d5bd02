// Package awsjson makes single calls to AWS services that speak the AWS JSON
// protocol (a JSON POST naming the operation in X-Amz-Target), signed with the
// SDK's Signature Version 4 signer. It serves the few calls the Lambda
// functions make where a generated SDK client would cost more bootstrap size
// than the functions' budget allows (SQS SendMessage, KMS GenerateDataKey and
// Decrypt); it does not retry (callers decide).
package awsjson

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go"
)

// Call names one operation of a JSON-protocol service.
type Call struct {
	// Service is the signing name ("sqs", "kms").
	Service string
	// Endpoint is the absolute URL the request is posted to (a trailing
	// slash is added: the protocol posts to "/").
	Endpoint string
	// ContentType is the protocol version's media type
	// (application/x-amz-json-1.0 or application/x-amz-json-1.1).
	ContentType string
	// Target is the X-Amz-Target header ("AmazonSQS.SendMessage"); empty
	// for a REST-JSON service (SES v2), whose operation is Path.
	Target string
	// Path is the REST-JSON operation's path ("/v2/email/outbound-emails");
	// empty for the JSON protocol, which posts to "/".
	Path string
}

// maxAnswer bounds the answer read; the calls made here answer a few KiB.
const maxAnswer = 1 << 20

// Do sends in as the JSON body of c with the credentials, region and HTTP
// client of cfg, and decodes a 2xx answer into out (an empty answer leaves
// out alone). It returns an *APIError for an error answer, a
// *TransportError when no answer came, and another error when the request
// cannot be built or signed.
func Do(ctx context.Context, cfg aws.Config, c Call, in, out any) error {
	payload, err := json.Marshal(in)
	if err != nil {
		return err
	}
	path := c.Path
	if path == "" {
		path = "/"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.Endpoint, "/")+path, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", c.ContentType)
	if c.Target != "" {
		req.Header.Set("X-Amz-Target", c.Target)
	}
	if cfg.Credentials == nil {
		return fmt.Errorf("%s: no AWS credentials", c.Service)
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("%s: credentials: %w", c.Service, err)
	}
	sum := sha256.Sum256(payload)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), c.Service, cfg.Region, time.Now()); err != nil {
		return fmt.Errorf("%s: sign: %w", c.Service, err)
	}
	var client interface {
		Do(*http.Request) (*http.Response, error)
	} = http.DefaultClient
	if cfg.HTTPClient != nil {
		client = cfg.HTTPClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return &TransportError{Service: c.Service, Err: err}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return &TransportError{Service: c.Service, Err: err}
	}
	if resp.StatusCode/100 == 2 {
		if len(answer) == 0 {
			return nil
		}
		if err := json.Unmarshal(answer, out); err != nil {
			return fmt.Errorf("%s: %s answered %d: %w: %.200s", c.Service, c.Target, resp.StatusCode, err, answer)
		}
		return nil
	}
	var e struct {
		Type     string `json:"__type"`
		Message  string `json:"message"`
		Message2 string `json:"Message"`
	}
	_ = json.Unmarshal(answer, &e)
	code := e.Type[strings.LastIndexByte(e.Type, '#')+1:]
	if code == "" {
		// REST-JSON names the error in a header ("Code:http://...").
		t := resp.Header.Get("X-Amzn-ErrorType")
		code, _, _ = strings.Cut(t, ":")
	}
	if code == "" {
		code = http.StatusText(resp.StatusCode)
	}
	msg := e.Message
	if msg == "" {
		msg = e.Message2
	}
	return &APIError{Service: c.Service, StatusCode: resp.StatusCode, Code: code, Message: msg}
}

// APIError is an error answered by the service. It is a smithy.APIError, so
// the SDK's error helpers and retry classifiers read it.
type APIError struct {
	Service    string
	StatusCode int
	Code       string
	Message    string
}

// Error names the service, status, code and message (the services used here
// never put secrets or key material in an error message).
func (e *APIError) Error() string {
	return fmt.Sprintf("%s answered HTTP %d %s: %s", e.Service, e.StatusCode, e.Code, e.Message)
}

// ErrorCode implements smithy.APIError.
func (e *APIError) ErrorCode() string { return e.Code }

// ErrorMessage implements smithy.APIError.
func (e *APIError) ErrorMessage() string { return e.Message }

// ErrorFault implements smithy.APIError: server for a 5xx answer, else client.
func (e *APIError) ErrorFault() smithy.ErrorFault {
	if e.StatusCode >= 500 {
		return smithy.FaultServer
	}
	return smithy.FaultClient
}

// TransportError is a request that got no (whole) answer.
type TransportError struct {
	Service string
	Err     error
}

func (e *TransportError) Error() string { return e.Service + ": " + e.Err.Error() }

// Unwrap returns the transport's error.
func (e *TransportError) Unwrap() error { return e.Err }

// IsTransport reports whether err is, or wraps, a TransportError.
func IsTransport(err error) bool {
	var te *TransportError
	return errors.As(err, &te)
}
