package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/agentclock/clockwork/internal/awsclient"
	"github.com/agentclock/clockwork/internal/awsclient/awsjson"
	"github.com/agentclock/clockwork/internal/awsrt"
)

// The AWS side of the alerts scenario: SES (v2, the runtime's sender) and
// EventBridge (a bus whose rule targets an SQS queue) on moto.

// sesSender is the SES identity the AWS mode sends e-mail channels from.
const sesSender = "clockwork@example.com"

func emulatorAWS(t *testing.T) (cfg awsjsonConfig) {
	t.Helper()
	ac, err := awsrt.AWSConfig(context.Background(), awsrt.Config{Endpoint: emulatorEndpoint})
	if err != nil {
		t.Fatal(err)
	}
	return awsjsonConfig{ac}
}

type awsjsonConfig struct{ aws.Config }

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// verifySESSender makes the sender a verified identity (SES refuses to
// send from any other).
func verifySESSender(t *testing.T) {
	t.Helper()
	c := emulatorAWS(t)
	err := awsjson.Do(context.Background(), c.Config, awsjson.Call{Service: "ses", Endpoint: emulatorEndpoint,
		ContentType: "application/json", Path: "/v2/email/identities"}, map[string]any{"EmailIdentity": sesSender}, &map[string]any{})
	if err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
		t.Fatalf("create SES identity: %v", err)
	}
}

var sentLast24 = regexp.MustCompile(`<SentLast24Hours>([0-9.]+)</SentLast24Hours>`)

// sesSentCount is SES's count of e-mails sent (GetSendQuota, SES v1's
// query protocol: the one place moto reports it).
func sesSentCount(t *testing.T) int {
	t.Helper()
	c := emulatorAWS(t)
	form := url.Values{"Action": {"GetSendQuota"}, "Version": {"2010-12-01"}}.Encode()
	req, _ := http.NewRequest("POST", emulatorEndpoint+"/", strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	creds, _ := c.Credentials.Retrieve(context.Background())
	sum := sha256Hex([]byte(form))
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, sum, "ses", c.Region, time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := sentLast24.FindSubmatch(b)
	if m == nil {
		t.Fatalf("GetSendQuota: %d %s", resp.StatusCode, b)
	}
	f, _ := strconv.ParseFloat(string(m[1]), 64)
	return int(f)
}

// eventBusToQueue creates an event bus whose rule sends clockwork's events
// to a new SQS queue, and returns the bus name and the queue URL.
func eventBusToQueue(t *testing.T, name string) (string, string) {
	t.Helper()
	c := emulatorAWS(t)
	ctx := context.Background()
	qURL, qARN, err := awsclient.CreateSQSQueue(ctx, awsclient.NewSQSSender(c.Config), name+"-events", nil)
	if err != nil {
		t.Fatal(err)
	}
	call := func(target string, in any) {
		t.Helper()
		if err := awsjson.Do(ctx, c.Config, awsjson.Call{Service: "events", Endpoint: emulatorEndpoint,
			ContentType: "application/x-amz-json-1.1", Target: "AWSEvents." + target}, in, &map[string]any{}); err != nil {
			t.Fatalf("%s: %v", target, err)
		}
	}
	call("CreateEventBus", map[string]any{"Name": name})
	call("PutRule", map[string]any{"Name": name + "-rule", "EventBusName": name, "EventPattern": `{"source":["clockwork"]}`})
	call("PutTargets", map[string]any{"Rule": name + "-rule", "EventBusName": name, "Targets": []any{map[string]any{"Id": "q", "Arn": qARN}}})
	return name, qURL
}

// receiveEvents reads what the bus's rule delivered to the queue: each
// message an EventBridge event ({source, detail-type, detail}).
func receiveEvents(t *testing.T, queueURL string, want func([]map[string]any) bool) []map[string]any {
	t.Helper()
	c := emulatorAWS(t)
	var got []map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out struct{ Messages []struct{ Body string } }
		err := awsjson.Do(context.Background(), c.Config, awsjson.Call{Service: "sqs", Endpoint: emulatorEndpoint,
			ContentType: "application/x-amz-json-1.0", Target: "AmazonSQS.ReceiveMessage"},
			map[string]any{"QueueUrl": queueURL, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1}, &out)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			var ev map[string]any
			if err := json.Unmarshal([]byte(m.Body), &ev); err != nil {
				t.Fatalf("event %s: %v", m.Body, err)
			}
			got = append(got, ev)
		}
		if want(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("EventBridge events: %v", got)
		}
	}
}
