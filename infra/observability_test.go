package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"
)

// TestAlarmsOfServiceHealth pins the production alarms: throttles of every
// function, the HTTP API's 5xx and p99 latency, the clock's asynchronous
// losses, Scheduler's dropped and un-dead-lettered fires, and the table's
// throttled requests and system errors; every one notifies the topic,
// which refuses plain HTTP.
func TestAlarmsOfServiceHealth(t *testing.T) {
	for stage, sy := range synth(t) {
		t.Run(stage, func(t *testing.T) {
			tmpl, tj := sy.template, sy.json
			topic, _ := only(t, tj, "AWS::SNS::Topic", "TopicName", "clockwork-"+stage+"-alarms")
			assert(t, "topic enforces TLS", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::SNS::TopicPolicy"), obj{
					"Topics": arr{ref(topic)},
					"PolicyDocument": like(obj{"Statement": arrayWith(like(obj{
						"Effect": "Deny", "Condition": obj{"Bool": obj{"aws:SecureTransport": "false"}},
					}))}),
				})
			})
			type want struct {
				ns, metric string
				dims       obj
				stat       string
				threshold  float64
				periods    int
			}
			var wants []want
			for _, name := range Functions {
				wants = append(wants, want{"AWS/Lambda", "Throttles", obj{"FunctionName": ref(fnID(t, tj, name, stage))}, "Sum", 1, 1})
			}
			clock := ref(fnID(t, tj, "clock", stage))
			for _, m := range []string{"DeadLetterErrors", "AsyncEventsDropped"} {
				wants = append(wants, want{"AWS/Lambda", m, obj{"FunctionName": clock}, "Sum", 1, 1})
			}
			for _, m := range []string{"InvocationDroppedCount", "InvocationsFailedToBeSentToDeadLetterCount"} {
				wants = append(wants, want{"AWS/Scheduler", m, obj{"ScheduleGroup": "clockwork-" + stage}, "Sum", 1, 1})
			}
			api, _ := only(t, tj, "AWS::ApiGatewayV2::Api", "ProtocolType", "HTTP")
			wants = append(wants,
				want{"AWS/ApiGateway", "5xx", obj{"ApiId": ref(api)}, "Sum", API5xxThreshold, 1},
				want{"AWS/ApiGateway", "Latency", obj{"ApiId": ref(api)}, "", APILatencyP99Ms, APILatencyPeriods},
			)
			for _, w := range wants {
				var dims arr
				for k, v := range w.dims {
					dims = append(dims, obj{"Name": k, "Value": v})
				}
				p := obj{
					"Namespace": w.ns, "MetricName": w.metric, "Threshold": w.threshold, "EvaluationPeriods": w.periods,
					"ComparisonOperator": "GreaterThanOrEqualToThreshold", "Dimensions": dims, "AlarmActions": arr{ref(topic)},
				}
				if w.stat != "" {
					p["Statistic"] = w.stat
				} else {
					p["ExtendedStatistic"] = "p99"
				}
				assert(t, fmt.Sprintf("alarm %s %s", w.ns, w.metric), func() {
					tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), p)
				})
			}
			// Dead alert notifications: metric math over every channel type.
			deadFound := false
			for _, a := range resources(tj, "AWS::CloudWatch::Alarm") {
				b, _ := json.Marshal(props(a)["Metrics"])
				if strings.Contains(string(b), `"MetricName":"clockwork_notifications_total"`) {
					deadFound = true
					for _, ct := range NotificationChannelTypes {
						if !strings.Contains(string(b), `"Value":"`+ct+`"`) || !strings.Contains(string(b), `"Value":"dead"`) {
							t.Errorf("dead-notifications alarm does not cover %s: %s", ct, b)
						}
					}
					if fmt.Sprint(props(a)["AlarmActions"]) != fmt.Sprint(arr{ref(topic)}) {
						t.Errorf("dead-notifications alarm does not notify the topic")
					}
				}
			}
			if !deadFound {
				t.Error("no alarm on dead alert notifications")
			}
			// The table's alarms are metric math over every operation.
			for _, m := range []string{"ThrottledRequests", "SystemErrors"} {
				found := false
				for _, a := range resources(tj, "AWS::CloudWatch::Alarm") {
					b, _ := json.Marshal(props(a)["Metrics"])
					if strings.Contains(string(b), `"MetricName":"`+m+`"`) && strings.Contains(string(b), `"Name":"TableName"`) {
						found = true
						for _, op := range []string{"GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "GetRecords"} {
							if !strings.Contains(string(b), `"Value":"`+op+`"`) {
								t.Errorf("table %s alarm does not cover %s: %s", m, op, b)
							}
						}
					}
				}
				if !found {
					t.Errorf("no alarm on the table's %s", m)
				}
			}
		})
	}
}

// TestDashboard checks the dashboard of the service's health: one per
// stack, named like it, showing the API, every function, Scheduler, the
// table and the queues, and the alarms.
func TestDashboard(t *testing.T) {
	for stage, sy := range synth(t) {
		t.Run(stage, func(t *testing.T) {
			_, d := only(t, sy.json, "AWS::CloudWatch::Dashboard", "DashboardName", "clockwork-"+stage)
			body, _ := json.Marshal(props(d)["DashboardBody"])
			for _, want := range []string{
				`AWS/ApiGateway`, `\"5xx\"`, `\"Latency\"`, `AWS/Lambda`, `\"Throttles\"`, `\"Invocations\"`, `\"IteratorAge\"`,
				`AWS/Scheduler`, `\"InvocationDroppedCount\"`, `AWS/DynamoDB`, `\"ThrottledRequests\"`, `\"SystemErrors\"`,
				`\"ConsumedWriteCapacityUnits\"`, `AWS/SQS`, `\"type\":\"alarm\"`,
			} {
				if !strings.Contains(string(body), want) {
					t.Errorf("dashboard lacks %s", want)
				}
			}
			for _, name := range Functions {
				if !strings.Contains(string(body), fnID(t, sy.json, name, stage)) {
					t.Errorf("dashboard does not show the %s function", name)
				}
			}
		})
	}
}
