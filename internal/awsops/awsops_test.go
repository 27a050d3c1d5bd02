package awsops

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func signed(method, url, service, target, body string) *http.Request {
	req := httptest.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20261201/us-east-1/"+service+"/aws4_request, SignedHeaders=host, Signature=00")
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// TestClassify maps requests as IAM authorizes them.
func TestClassify(t *testing.T) {
	cases := []struct {
		name string
		req  *http.Request
		want []string
	}{
		{"get item", signed("POST", "http://x/", "dynamodb", "DynamoDB_20120810.GetItem", `{"TableName":"t"}`), []string{"dynamodb:GetItem table/t"}},
		{"index query", signed("POST", "http://x/", "dynamodb", "DynamoDB_20120810.Query", `{"TableName":"t","IndexName":"gsi5"}`), []string{"dynamodb:Query table/t/index/gsi5"}},
		{"transaction: each part", signed("POST", "http://x/", "dynamodb", "DynamoDB_20120810.TransactWriteItems",
			`{"TransactItems":[{"Put":{"TableName":"t"}},{"Delete":{"TableName":"t"}},{"ConditionCheck":{"TableName":"t"}},{"Update":{"TableName":"t"}}]}`),
			[]string{"dynamodb:PutItem table/t", "dynamodb:DeleteItem table/t", "dynamodb:ConditionCheckItem table/t", "dynamodb:UpdateItem table/t"}},
		{"stream", signed("POST", "http://x/", "dynamodb", "DynamoDBStreams_20120810.GetRecords", `{"ShardIterator":"i"}`), []string{"dynamodb:GetRecords table-stream"}},
		{"schedule with a role passes it", signed("POST", "http://x/schedules/s1", "scheduler", "", `{"GroupName":"g","Target":{"Arn":"a","RoleArn":"arn:r"}}`),
			[]string{"scheduler:CreateSchedule schedule/g/s1", "iam:PassRole role/arn:r"}},
		{"delete schedule", signed("DELETE", "http://x/schedules/s1?groupName=g", "scheduler", "", ""), []string{"scheduler:DeleteSchedule schedule/g/s1"}},
		{"sqs batch delete", signed("POST", "http://x/", "sqs", "AmazonSQS.DeleteMessageBatch", `{"QueueUrl":"http://q/1/timers"}`), []string{"sqs:DeleteMessage queue/http://q/1/timers"}},
		{"kms", signed("POST", "http://x/", "kms", "TrentService.Decrypt", `{"KeyId":"k"}`), []string{"kms:Decrypt key/k"}},
		{"ssm", signed("POST", "http://x/", "ssm", "AmazonSSM.GetParameter", `{"Name":"/p"}`), []string{"ssm:GetParameter parameter//p"}},
		{"converse is InvokeModel", signed("POST", "http://x/model/m.v1%3A0/converse", "bedrock", "", `{}`), []string{"bedrock:InvokeModel foundation-model/m.v1:0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := []byte{}
			if c.req.Body != nil {
				b = make([]byte, c.req.ContentLength)
				c.req.Body.Read(b)
			}
			ops, err := Classify(c.req, b)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range ops {
				got = append(got, o.Action+" "+o.Resource)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
	if _, err := Classify(signed("POST", "http://x/", "lambda", "", ""), nil); err == nil {
		t.Error("an unknown service was classified")
	}
	if _, err := Classify(httptest.NewRequest("GET", "http://x/", nil), nil); err == nil {
		t.Error("an unsigned request was classified")
	}
}

// TestRecorderAttributes records each request under its context's function.
func TestRecorderAttributes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	rec := NewRecorder()
	req := signed("POST", srv.URL, "ssm", "AmazonSSM.GetParameter", `{"Name":"/p"}`)
	req.RequestURI = ""
	req = req.WithContext(WithFunction(context.Background(), "authorizer"))
	res, err := rec.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := rec.Ops(); len(got) != 1 || got[0] != (Op{"authorizer", "ssm:GetParameter", "parameter//p"}) {
		t.Errorf("recorded %v", got)
	}
}
