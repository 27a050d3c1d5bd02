package awsjson

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"
)

func testConfig() aws.Config {
	return aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
}

// TestDo checks the request as the AWS JSON protocol has it (POST to the
// root, X-Amz-Target, the protocol's media type, a SigV4 Authorization for
// the service and region, the body as JSON) and each kind of answer.
func TestDo(t *testing.T) {
	var status int
	var answer string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method != http.MethodPost || r.URL.Path != "/":
			t.Errorf("request %s %s, want POST /", r.Method, r.URL.Path)
		case r.Header.Get("X-Amz-Target") != "TrentService.Decrypt":
			t.Errorf("X-Amz-Target = %q", r.Header.Get("X-Amz-Target"))
		case r.Header.Get("Content-Type") != "application/x-amz-json-1.1":
			t.Errorf("Content-Type = %q", r.Header.Get("Content-Type"))
		case !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKID/") ||
			!strings.Contains(r.Header.Get("Authorization"), "/eu-west-1/kms/aws4_request"):
			t.Errorf("Authorization = %q, want SigV4 for kms in eu-west-1", r.Header.Get("Authorization"))
		case r.Header.Get("X-Amz-Content-Sha256") == "" && r.Header.Get("X-Amz-Date") == "":
			t.Errorf("no SigV4 date header")
		case string(body) != `{"KeyId":"k"}`:
			t.Errorf("body = %s", body)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	defer srv.Close()
	call := Call{Service: "kms", Endpoint: srv.URL, ContentType: "application/x-amz-json-1.1", Target: "TrentService.Decrypt"}
	in := map[string]string{"KeyId": "k"}
	ctx := context.Background()

	status, answer = 200, `{"Plaintext":"AAEC"}`
	var out struct{ Plaintext []byte }
	if err := Do(ctx, testConfig(), call, in, &out); err != nil || string(out.Plaintext) != "\x00\x01\x02" {
		t.Fatalf("Do = %v, %q", err, out.Plaintext)
	}

	status, answer = 200, ``
	if err := Do(ctx, testConfig(), call, in, &out); err != nil {
		t.Fatalf("empty 200 answer: %v", err)
	}

	status, answer = 200, `{"Plaintext":`
	if err := Do(ctx, testConfig(), call, in, &out); err == nil || IsTransport(err) {
		t.Fatalf("malformed answer: %v, want a decoding error", err)
	}

	status, answer = 400, `{"__type":"com.amazonaws.kms#InvalidCiphertextException","message":"bad"}`
	err := Do(ctx, testConfig(), call, in, &out)
	var ae *APIError
	var se smithy.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Code != "InvalidCiphertextException" || ae.Message != "bad" ||
		!errors.As(err, &se) || se.ErrorFault() != smithy.FaultClient {
		t.Fatalf("400 answer: %#v", err)
	}

	status, answer = 503, `{"__type":"ServiceUnavailable","Message":"later"}`
	err = Do(ctx, testConfig(), call, in, &out)
	if !errors.As(err, &ae) || ae.Code != "ServiceUnavailable" || ae.Message != "later" || ae.ErrorFault() != smithy.FaultServer {
		t.Fatalf("503 answer: %#v", err)
	}

	status, answer = 500, `not json`
	if err = Do(ctx, testConfig(), call, in, &out); !errors.As(err, &ae) || ae.Code != "Internal Server Error" {
		t.Fatalf("500 without a body: %#v", err)
	}
}

// TestDoTransportAndCredentials: no answer is a TransportError; no
// credentials is an error before any request.
func TestDoTransportAndCredentials(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	call := Call{Service: "sqs", Endpoint: url, ContentType: "application/x-amz-json-1.0", Target: "AmazonSQS.SendMessage"}
	if err := Do(context.Background(), testConfig(), call, struct{}{}, nil); !IsTransport(err) {
		t.Fatalf("closed endpoint: %v, want a transport error", err)
	}
	if err := Do(context.Background(), aws.Config{Region: "eu-west-1"}, call, struct{}{}, nil); err == nil || IsTransport(err) {
		t.Fatalf("no credentials: %v", err)
	}
}
