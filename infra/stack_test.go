package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/store"
)

type obj = map[string]any
type arr = []any

func like(m obj) assertions.Matcher         { return assertions.Match_ObjectLike(&m) }
func arrayWith(a ...any) assertions.Matcher { return assertions.Match_ArrayWith(&a) }

func TestTable(t *testing.T) {
	for stage, sy := range synth(t) {
		t.Run(stage, func(t *testing.T) {
			tmpl, tj := sy.template, sy.json
			assert(t, "one table", func() { tmpl.ResourceCountIs(jsii.String("AWS::DynamoDB::Table"), jsii.Number(1)) })

			var gsis arr
			for _, ix := range store.Indexes {
				name := string(ix)
				gsis = append(gsis, obj{
					"IndexName": name,
					"KeySchema": arr{
						obj{"AttributeName": name + "_pk", "KeyType": "HASH"},
						obj{"AttributeName": name + "_sk", "KeyType": "RANGE"},
					},
					"Projection": obj{"ProjectionType": "KEYS_ONLY"},
				})
			}
			assert(t, "table properties", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), obj{
					"TableName":                        "clockwork-" + stage,
					"KeySchema":                        arr{obj{"AttributeName": "pk", "KeyType": "HASH"}, obj{"AttributeName": "sk", "KeyType": "RANGE"}},
					"BillingMode":                      "PAY_PER_REQUEST",
					"StreamSpecification":              obj{"StreamViewType": "NEW_AND_OLD_IMAGES"},
					"PointInTimeRecoverySpecification": obj{"PointInTimeRecoveryEnabled": true},
					"DeletionProtectionEnabled":        stage != "dev",
					"GlobalSecondaryIndexes":           assertions.Match_ArrayEquals(&gsis),
					// TTL on expiresAt: what retention sets on a final record's items.
					"TimeToLiveSpecification": obj{"AttributeName": "expiresAt", "Enabled": true},
					// On-demand: no provisioned throughput anywhere.
					"ProvisionedThroughput": assertions.Match_Absent(),
				})
			})

			// A fixed logical id: redeploys (and refactors of the construct
			// tree) update the table in place, never replace it.
			table, ok := tj["Resources"].(obj)["Table"].(obj)
			if !ok || table["Type"] != "AWS::DynamoDB::Table" {
				t.Fatalf("the table's logical id is not the fixed id \"Table\"")
			}
			policy := "Delete"
			if stage != "dev" {
				policy = "Retain"
			}
			if table["DeletionPolicy"] != policy || table["UpdateReplacePolicy"] != policy {
				t.Errorf("table DeletionPolicy/UpdateReplacePolicy = %v/%v, want %s", table["DeletionPolicy"], table["UpdateReplacePolicy"], policy)
			}
		})
	}
}

func TestFunctions(t *testing.T) {
	for stage, sy := range synth(t) {
		t.Run(stage, func(t *testing.T) {
			tmpl, tj := sy.template, sy.json
			cfg := sy.cfg
			assert(t, "six functions", func() { tmpl.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(6)) })
			// Every function: arm64, provided.al2023 (bootstrap), traced,
			// JSON logs to its own log group with retention.
			assert(t, "every function", func() {
				tmpl.AllResourcesProperties(jsii.String("AWS::Lambda::Function"), obj{
					"Architectures": arr{"arm64"},
					"Runtime":       "provided.al2023",
					"Handler":       "bootstrap",
					"TracingConfig": obj{"Mode": "Active"},
					"LoggingConfig": like(obj{"LogFormat": "JSON", "LogGroup": like(obj{"Ref": assertions.Match_AnyValue()})}),
					"MemorySize":    FunctionMemoryMB,
					"Code":          like(obj{"S3Key": assertions.Match_StringLikeRegexp(jsii.String(`^[0-9a-f]{64}\.zip$`))}),
				})
			})
			logGroups := resources(tj, "AWS::Logs::LogGroup")
			common := obj{"TABLE_NAME": "clockwork-" + stage, "STAGE": stage, "ALLOW_PRIVATE_AGENTS": "false", "METRICS_NAMESPACE": "Clockwork/clockwork-" + stage,
				"RETAIN_EXPECTATIONS": "P90D", "RETAIN_EVIDENCE": "P400D", "DELIVERY_RETRY_FOR": "24h", "FACT_LOOKBACK_MAX": "PT24H", "ZONEINFO": "/var/task/zoneinfo.zip",
				"CREDENTIALS_KEY_ID": getAtt(onlyID(t, tj, "AWS::KMS::Key", "Description", "Seals the credentials clockwork-"+stage+" presents to agents (CREDENTIALS_KEY_ID)"), "Arn")}
			timers := ref(onlyID(t, tj, "AWS::SQS::Queue", "QueueName", "clockwork-"+stage+"-timers"))
			grading := ref(onlyID(t, tj, "AWS::SQS::Queue", "QueueName", "clockwork-"+stage+"-grading"))
			env := map[string]obj{
				"api":        {"TRUST_AUTHORIZER": "true", "GRADING_QUEUE_URL": grading},
				"authorizer": {"TOKENS_PARAMETER": "/clockwork/" + stage + "/tokens"},
				"clock":      {"TIMER_QUEUE_URL": timers, "GRADING_QUEUE_URL": grading},
				"grader":     {"GRADING_QUEUE_URL": grading},
				"ingest":     {"TRUST_AUTHORIZER": "true"},
				"stream": {
					"TIMER_QUEUE_URL":    timers,
					"GRADING_QUEUE_URL":  grading,
					"SCHEDULE_GROUP":     "clockwork-" + stage,
					"CLOCK_FUNCTION_ARN": getAtt(fnID(t, tj, "clock", stage), "Arn"),
					"SCHEDULER_ROLE_ARN": getAtt(onlyID(t, tj, "AWS::IAM::Role", "Description", "Assumed by EventBridge Scheduler (clockwork-"+stage+" schedules) to invoke the clock function"), "Arn"),
					"SCHEDULER_DLQ_ARN":  getAtt(onlyID(t, tj, "AWS::SQS::Queue", "QueueName", "clockwork-"+stage+"-scheduler-dlq"), "Arn"),
				},
			}
			if stage == "staging" {
				// testConfig deploys staging with the alert settings: the
				// functions that notify (api, clock) have them.
				for _, fn := range []string{"api", "clock"} {
					env[fn]["SES_FROM"], env[fn]["EVENTBRIDGE_ALERTS"], env[fn]["PUBLIC_URL"] = "clockwork@example.com", "true", "https://clockwork.example.com"
				}
				// The stream function subscribes to watched tasks there.
				env["stream"]["PUBLIC_URL"] = "https://clockwork.example.com"
			}
			assets := map[string]bool{}
			for _, name := range Functions {
				_, fn := only(t, tj, "AWS::Lambda::Function", "FunctionName", "clockwork-"+stage+"-"+name)
				p := props(fn)
				want := obj{"STAGE": stage}
				if name != "authorizer" {
					for k, v := range common {
						want[k] = v
					}
				}
				for k, v := range env[name] {
					want[k] = v
				}
				got := p["Environment"].(obj)["Variables"].(obj)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s environment:\n got %v\nwant %v", name, got, want)
				}
				lg := p["LoggingConfig"].(obj)["LogGroup"].(obj)["Ref"].(string)
				if d := props(logGroups[lg])["RetentionInDays"]; fmt.Sprint(d) != fmt.Sprint(cfg.LogRetentionDays) {
					t.Errorf("%s log group retention = %v days, want %d", name, d, cfg.LogRetentionDays)
				}
				assets[p["Code"].(obj)["S3Key"].(string)] = true
			}
			if len(assets) != len(Functions) {
				t.Errorf("functions share code assets: %v", assets)
			}
			// Reserved concurrency on the clock function only: it bounds
			// the burst of due instants against the table; the stream
			// function is bounded by the shards, the API by throttling.
			assert(t, "clock reserved concurrency, DLQ", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), obj{
					"FunctionName":                 "clockwork-" + stage + "-clock",
					"ReservedConcurrentExecutions": cfg.ClockConcurrency,
					"Timeout":                      ClockTimeoutS,
					"DeadLetterConfig":             obj{"TargetArn": getAtt(onlyID(t, tj, "AWS::SQS::Queue", "QueueName", "clockwork-"+stage+"-scheduler-dlq"), "Arn")},
				})
			})
			// Reserved concurrency on the others too: caps on the api and
			// authorizer (a flood of requests cannot take the account), and
			// the stream function's guaranteed (its consumer stays alive).
			for name, want := range map[string]int{"api": cfg.APIConcurrency, "authorizer": cfg.AuthorizerConcurrency, "stream": cfg.StreamConcurrency} {
				if want <= 0 {
					t.Errorf("%s: no reserved concurrency in stage %s", name, stage)
				}
				assert(t, name+" reserved concurrency", func() {
					tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), obj{
						"FunctionName": "clockwork-" + stage + "-" + name, "ReservedConcurrentExecutions": want,
					})
				})
			}
			assert(t, "clock async retries", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventInvokeConfig"), obj{
					"FunctionName": ref(fnID(t, tj, "clock", stage)), "MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 6 * 3600,
				})
			})
			assert(t, "timeouts", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), obj{"FunctionName": "clockwork-" + stage + "-api", "Timeout": APITimeoutS})
				tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), obj{"FunctionName": "clockwork-" + stage + "-authorizer", "Timeout": AuthorizerTimeoutS})
				tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), obj{"FunctionName": "clockwork-" + stage + "-stream", "Timeout": StreamTimeoutS})
			})
		})
	}
}

func fnID(t *testing.T, tj obj, name, stage string) string {
	t.Helper()
	id, _ := only(t, tj, "AWS::Lambda::Function", "FunctionName", "clockwork-"+stage+"-"+name)
	return id
}

func onlyID(t *testing.T, tj obj, typ, key string, value any) string {
	t.Helper()
	id, _ := only(t, tj, typ, key, value)
	return id
}

func TestHTTPAPI(t *testing.T) {
	for stage, sy := range synth(t) {
		t.Run(stage, func(t *testing.T) {
			tmpl, tj, cfg := sy.template, sy.json, sy.cfg
			apiID, _ := only(t, tj, "AWS::ApiGatewayV2::Api", "ProtocolType", "HTTP")
			assert(t, "stage: throttling, access logs", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Stage"), obj{
					"ApiId":                ref(apiID),
					"StageName":            "$default",
					"AutoDeploy":           true,
					"DefaultRouteSettings": obj{"ThrottlingRateLimit": cfg.ThrottleRate, "ThrottlingBurstLimit": cfg.ThrottleBurst},
					"AccessLogSettings":    like(obj{"DestinationArn": like(obj{"Fn::GetAtt": arrayWith("Arn")})}),
					// The routes that need no token have their own, lower throttle.
					"RouteSettings": publicRouteSettings(cfg),
				})
			})
			_, st := only(t, tj, "AWS::ApiGatewayV2::Stage", "StageName", "$default")
			als := props(st)["AccessLogSettings"].(obj)
			dest := als["DestinationArn"].(obj)["Fn::GetAtt"].(arr)[0].(string)
			if lg := resources(tj, "AWS::Logs::LogGroup")[dest]; lg == nil || fmt.Sprint(props(lg)["RetentionInDays"]) != fmt.Sprint(cfg.LogRetentionDays) {
				t.Errorf("access logs go to %s, not a log group with %d days retention", dest, cfg.LogRetentionDays)
			}
			var format map[string]string
			if err := json.Unmarshal([]byte(als["Format"].(string)), &format); err != nil {
				t.Errorf("access log format is not JSON: %v", err)
			}
			for _, k := range []string{"requestId", "ip", "routeKey", "status", "responseLatency", "integrationError"} {
				if format[k] == "" {
					t.Errorf("access log format lacks %s", k)
				}
			}
			if f := strings.ToLower(als["Format"].(string)); strings.Contains(f, "header") || strings.Contains(f, "authorization") {
				t.Errorf("access log format must not log headers (bearer tokens): %s", f)
			}

			// The Lambda authorizer: payload 2.0, simple responses, the
			// Authorization header as identity (so a request without one is
			// refused with 401 before the authorizer runs), cached per header.
			authzID, _ := only(t, tj, "AWS::ApiGatewayV2::Authorizer", "Name", "clockwork-"+stage+"-tokens")
			assert(t, "authorizer", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Authorizer"), obj{
					"ApiId": ref(apiID), "AuthorizerType": "REQUEST", "AuthorizerPayloadFormatVersion": "2.0",
					"EnableSimpleResponses": true, "IdentitySource": arr{"$request.header.Authorization"},
					"AuthorizerResultTtlInSeconds": AuthorizerCacheTTLS,
					"AuthorizerUri":                like(obj{"Fn::Join": arrayWith(arrayWith(getAtt(fnID(t, tj, "authorizer", stage), "Arn")))}),
				})
			})

			// The push route's authorizer: the same function, no identity
			// source (API Gateway requires every listed one, and an A2A 0.3
			// push carries X-A2A-Notification-Token instead of
			// Authorization), so no cache either.
			pushAuthzID, _ := only(t, tj, "AWS::ApiGatewayV2::Authorizer", "Name", "clockwork-"+stage+"-push-tokens")
			assert(t, "push authorizer", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Authorizer"), obj{
					"ApiId": ref(apiID), "AuthorizerType": "REQUEST", "AuthorizerPayloadFormatVersion": "2.0",
					"EnableSimpleResponses": true, "IdentitySource": arr{}, "AuthorizerResultTtlInSeconds": 0,
					"AuthorizerUri": like(obj{"Fn::Join": arrayWith(arrayWith(getAtt(fnID(t, tj, "authorizer", stage), "Arn")))}),
				})
			})
			if PushRoute != auth.PushRoute {
				t.Errorf("PushRoute %q is not auth.PushRoute %q", PushRoute, auth.PushRoute)
			}
			if n := len(resources(tj, "AWS::ApiGatewayV2::Authorizer")); n != 2 {
				t.Errorf("%d authorizers, want 2 (tokens, push)", n)
			}

			// Routes: exactly the list, every one to the API function but
			// the OTLP route to the ingest function, every one but the
			// public ones behind the authorizer (the push route behind the
			// push authorizer).
			public := map[string]bool{}
			for _, r := range Routes {
				public[r.Method+" "+r.Path] = r.Public
			}
			var got, want []string
			integrationOf := map[string]string{} // function name -> integration id
			for id, in := range resources(tj, "AWS::ApiGatewayV2::Integration") {
				uri := fmt.Sprint(props(in)["IntegrationUri"])
				for _, fn := range []string{"api", "ingest"} {
					if strings.Contains(uri, fnID(t, tj, fn, stage)) {
						integrationOf[fn] = id
					}
				}
			}
			if len(integrationOf) != 2 || len(resources(tj, "AWS::ApiGatewayV2::Integration")) != 2 {
				t.Fatalf("integrations %v, want one to the api function and one to the ingest function", integrationOf)
			}
			for _, r := range resources(tj, "AWS::ApiGatewayV2::Route") {
				key := props(r)["RouteKey"].(string)
				got = append(got, key)
				target := fmt.Sprint(props(r)["Target"])
				wantFn := "api"
				if key == TracesRoute {
					wantFn = "ingest"
				}
				if !strings.Contains(target, integrationOf[wantFn]) {
					t.Errorf("route %s targets %s, not the %s integration", key, target, wantFn)
				}
				authType, authID := props(r)["AuthorizationType"], fmt.Sprint(props(r)["AuthorizerId"])
				if public[key] {
					if authType != nil && authType != "NONE" {
						t.Errorf("public route %s has authorization %v", key, authType)
					}
				} else if key == PushRoute {
					if authType != "CUSTOM" || !strings.Contains(authID, pushAuthzID) {
						t.Errorf("route %s: authorization %v by %s, want CUSTOM by the push authorizer", key, authType, authID)
					}
				} else if authType != "CUSTOM" || !strings.Contains(authID, authzID) {
					t.Errorf("route %s: authorization %v by %s, want CUSTOM by the token authorizer", key, authType, authID)
				}
			}
			for _, r := range Routes {
				want = append(want, r.Method+" "+r.Path)
			}
			sort.Strings(got)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("routes:\n got %v\nwant %v", got, want)
			}
			assert(t, "integration", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Integration"), obj{
					"ApiId": ref(apiID), "IntegrationType": "AWS_PROXY", "PayloadFormatVersion": "2.0",
					"IntegrationUri": getAtt(fnID(t, tj, "api", stage), "Arn"),
				})
			})
			// Four invoke permissions (the API function, the ingest
			// function, the authorizer once per authorizer), each scoped to
			// this API.
			assert(t, "four permissions", func() {
				tmpl.ResourceCountIs(jsii.String("AWS::Lambda::Permission"), jsii.Number(4))
				for _, name := range []string{"api", "ingest", "authorizer"} {
					tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Permission"), obj{
						"Principal": "apigateway.amazonaws.com", "Action": "lambda:InvokeFunction",
						"FunctionName": getAtt(fnID(t, tj, name, stage), "Arn"),
						"SourceArn":    like(obj{"Fn::Join": arrayWith(arrayWith(ref(apiID)))}),
					})
				}
			})
		})
	}
}

func TestScheduler(t *testing.T) {
	for stage, sy := range synth(t) {
		t.Run(stage, func(t *testing.T) {
			tmpl, tj := sy.template, sy.json
			gid, group := only(t, tj, "AWS::Scheduler::ScheduleGroup", "Name", "clockwork-"+stage)
			policy := "Delete"
			if stage != "dev" {
				policy = "Retain"
			}
			if group["DeletionPolicy"] != policy {
				t.Errorf("schedule group %s DeletionPolicy = %v, want %s (it holds the pending instants)", gid, group["DeletionPolicy"], policy)
			}
			roleID := onlyID(t, tj, "AWS::IAM::Role", "Description", "Assumed by EventBridge Scheduler (clockwork-"+stage+" schedules) to invoke the clock function")
			assert(t, "scheduler role trust", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::IAM::Role"), obj{
					"Description": "Assumed by EventBridge Scheduler (clockwork-" + stage + " schedules) to invoke the clock function",
					"AssumeRolePolicyDocument": like(obj{"Statement": arr{obj{
						"Action": "sts:AssumeRole", "Effect": "Allow",
						"Principal": obj{"Service": "scheduler.amazonaws.com"},
						"Condition": obj{
							"StringEquals": obj{"aws:SourceAccount": ref("AWS::AccountId")},
							"ArnEquals":    obj{"aws:SourceArn": getAtt(gid, "Arn")},
						},
					}}}),
				})
			})
			clock := fnID(t, tj, "clock", stage)
			dlq := onlyID(t, tj, "AWS::SQS::Queue", "QueueName", "clockwork-"+stage+"-scheduler-dlq")
			acts := actionsOf(statementsOfRole(tj, roleID))
			if len(acts) != 2 {
				t.Errorf("scheduler role may do %v, want only lambda:InvokeFunction and sqs:SendMessage", keys(acts))
			}
			wantInvoke := arr{getAtt(clock, "Arn"), obj{"Fn::Join": arr{"", arr{getAtt(clock, "Arn"), ":*"}}}}
			if r := acts["lambda:InvokeFunction"]; fmt.Sprint(r) != fmt.Sprint(wantInvoke) {
				t.Errorf("scheduler role invokes %v, want the clock function (and its versions) only", r)
			}
			if r := acts["sqs:SendMessage"]; fmt.Sprint(r) != fmt.Sprint(arr{getAtt(dlq, "Arn")}) {
				t.Errorf("scheduler role sends to %v, want the scheduler DLQ", r)
			}
		})
	}
}

func keys[M ~map[string]V, V any](m M) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// actionsWithoutResources are the only actions granted on "*": they
// support no resource-level permissions (X-Ray's PutTraceSegments and
// PutTelemetryRecords, DynamoDB Streams' ListStreams, which the stream
// mapping needs).
var actionsWithoutResources = []string{"xray:PutTraceSegments", "xray:PutTelemetryRecords", "dynamodb:ListStreams"}

func TestLeastPrivilege(t *testing.T) {
	for stage, sy := range synth(t) {
		t.Run(stage, func(t *testing.T) {
			tj := sy.json
			for id, r := range resources(tj, "AWS::IAM::Role") {
				if m := props(r)["ManagedPolicyArns"]; m != nil {
					t.Errorf("role %s has managed policies %v: grant narrower inline statements", id, m)
				}
				if p := props(r)["Policies"]; p != nil {
					t.Errorf("role %s has inline Policies outside AWS::IAM::Policy: %v", id, p)
				}
			}
			for id, p := range resources(tj, "AWS::IAM::Policy") {
				doc := props(p)["PolicyDocument"].(obj)
				for _, s := range list(doc["Statement"]) {
					st := s.(obj)
					if st["Effect"] != "Allow" {
						continue
					}
					for _, a := range list(st["Action"]) {
						if a == "*" || strings.HasSuffix(a.(string), ":*") || strings.Contains(a.(string), "*") {
							t.Errorf("policy %s allows the wildcard action %v", id, a)
						}
					}
					for _, r := range list(st["Resource"]) {
						if r != "*" {
							continue
						}
						for _, a := range list(st["Action"]) {
							if !slices.Contains(actionsWithoutResources, a.(string)) {
								t.Errorf("policy %s allows %v on every resource", id, a)
							}
						}
					}
				}
			}

			// Who may do what.
			roles := map[string]string{}
			for _, name := range Functions {
				roles[name] = roleOfFunction(t, tj, "clockwork-"+stage+"-"+name)
			}
			schedRole := onlyID(t, tj, "AWS::IAM::Role", "Description", "Assumed by EventBridge Scheduler (clockwork-"+stage+" schedules) to invoke the clock function")
			for name, role := range roles {
				acts := actionsOf(statementsOfRole(tj, role))
				if name == "authorizer" {
					// Nothing but the tokens and its own logs.
					for a := range acts {
						if !slices.Contains([]string{"ssm:GetParameter", "logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTraceSegments", "xray:PutTelemetryRecords"}, a) {
							t.Errorf("authorizer function has %s", a)
						}
					}
					if r := fmt.Sprint(acts["logs:PutLogEvents"]); len(acts["logs:PutLogEvents"]) != 1 || !strings.Contains(r, "Logs") {
						t.Errorf("authorizer function writes logs to %s, want its own log group only", r)
					}
					continue
				}
				for _, a := range TableActionsOf[name] {
					if r := fmt.Sprint(acts[a]); !strings.Contains(r, "Table") {
						t.Errorf("%s function lacks %s on the table (%s)", name, a, r)
					}
				}
				if r := fmt.Sprint(acts["dynamodb:Query"]); strings.Contains(r, "/index/*") != IndexQueries[name] {
					t.Errorf("%s function queries the indexes: %s, want %v", name, r, IndexQueries[name])
				}
				for _, a := range []string{"dynamodb:Scan", "dynamodb:DeleteTable", "dynamodb:BatchWriteItem"} {
					if acts[a] != nil {
						t.Errorf("%s function has %s, which the adapter never uses", name, a)
					}
				}
				if r := fmt.Sprint(acts["logs:PutLogEvents"]); len(acts["logs:PutLogEvents"]) != 1 || !strings.Contains(r, "Logs") {
					t.Errorf("%s function writes logs to %s, want its own log group only", name, r)
				}
				_, wantSched := map[string]bool{"stream": true}[name]
				for _, a := range append(slices.Clone(SchedulerActions), "iam:PassRole") {
					if (acts[a] != nil) != wantSched {
						t.Errorf("%s function: %s granted = %v, want %v", name, a, acts[a] != nil, wantSched)
					}
				}
				if wantSched {
					for _, a := range SchedulerActions {
						if r := fmt.Sprint(acts[a]); !strings.Contains(r, ":schedule/clockwork-"+stage+"/*") {
							t.Errorf("stream function %s on %s, want the group's schedules", a, r)
						}
					}
					if r := acts["iam:PassRole"]; fmt.Sprint(r) != fmt.Sprint(arr{getAtt(schedRole, "Arn")}) {
						t.Errorf("stream function passes %v, want only the scheduler role", r)
					}
				}
				if acts["ssm:GetParameter"] != nil {
					t.Errorf("%s function: ssm:GetParameter = %v", name, acts["ssm:GetParameter"])
				}
			}
			assert(t, "PassRole only to Scheduler", func() {
				sy.template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), obj{
					"PolicyDocument": like(obj{"Statement": arrayWith(obj{
						"Sid": "PassSchedulerRole", "Effect": "Allow", "Action": "iam:PassRole",
						"Resource":  getAtt(schedRole, "Arn"),
						"Condition": obj{"StringEquals": obj{"iam:PassedToService": "scheduler.amazonaws.com"}},
					})}),
					"Roles": arr{ref(roles["stream"])},
				})
			})
			assert(t, "tokens parameter", func() {
				sy.template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), obj{
					"PolicyDocument": like(obj{"Statement": arrayWith(like(obj{
						"Sid": "ReadTokens", "Action": "ssm:GetParameter",
						"Resource": like(obj{"Fn::Join": arrayWith(arrayWith(":parameter/clockwork/" + stage + "/tokens"))}),
					}))}),
					"Roles": arr{ref(roles["authorizer"])},
				})
			})
		})
	}
}

func TestOutputs(t *testing.T) {
	for stage, sy := range synth(t) {
		t.Run(stage, func(t *testing.T) {
			tmpl, tj := sy.template, sy.json
			apiID, _ := only(t, tj, "AWS::ApiGatewayV2::Api", "ProtocolType", "HTTP")
			assert(t, "ApiUrl", func() {
				tmpl.HasOutput(jsii.String("ApiUrl"), obj{"Value": like(obj{"Fn::Join": arrayWith(arrayWith("https://", ref(apiID)))})})
			})
			assert(t, "TableName", func() { tmpl.HasOutput(jsii.String("TableName"), obj{"Value": ref("Table")}) })
		})
	}
}

// publicRouteSettings are the route throttles of the routes that need no
// token.
func publicRouteSettings(cfg Config) obj {
	out := obj{}
	for _, r := range Routes {
		if r.Public {
			out[r.Method+" "+r.Path] = obj{"ThrottlingRateLimit": cfg.PublicThrottleRate, "ThrottlingBurstLimit": cfg.PublicThrottleBurst}
		}
	}
	return out
}
