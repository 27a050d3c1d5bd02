package main

// The API's functions (api, authorizer, ingest), their alert senders, and
// the HTTP API in front of them.

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
)

// apiFunctions adds the authorizer and API functions, and the grants of
// the signing key and the credentials key.
func (sb *stackBuilder) apiFunctions() {
	st := sb.st
	stack := sb.st.Stack
	cfg := sb.cfg

	// The authorizer function authenticates bearer tokens against the
	// hashed tokens in SSM (SecureString, created by the operator; the AWS
	// managed key aws/ssm needs no extra grant). It is the only function
	// that reads them; the API function trusts its answer.
	tokensArn := stack.FormatArn(&awscdk.ArnComponents{
		Service: s("ssm"), Resource: s("parameter"), ResourceName: s(strings.TrimPrefix(cfg.TokensParameter, "/")),
		ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	})
	st.Authorizer = sb.function("AuthorizerFunction", "authorizer", "HTTP API Lambda authorizer: authenticates bearer tokens against the hashed tokens in SSM",
		AuthorizerTimeoutS, false, map[string]string{"TOKENS_PARAMETER": cfg.TokensParameter}, func(p *awslambda.FunctionProps) { reserve(p, cfg.AuthorizerConcurrency) })
	st.Authorizer.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("ReadTokens"), Actions: strs("ssm:GetParameter"), Resources: &[]*string{tokensArn},
	}))
	st.API = sb.function("ApiFunction", "api", "HTTP API (API Gateway payload v2): agents, expectations, facts, anticipations, verifications",
		APITimeoutS, true, map[string]string{"TRUST_AUTHORIZER": "true"}, func(p *awslambda.FunctionProps) { reserve(p, cfg.APIConcurrency) })
	// POST /v1/evaluations puts a re-grading job's first step on the
	// grading queue (the grader function runs it).
	st.API.AddEnvironment(s("GRADING_QUEUE_URL"), st.GradingQueue.QueueUrl(), nil)
	if cfg.JudgeKind != "" {
		// So that an evaluation may name another model of the judge.
		st.API.AddEnvironment(s("MODEL_GRADING"), s("true"), nil)
	}
	st.API.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("EvaluationSteps"), Actions: strs("sqs:SendMessage"), Resources: &[]*string{st.GradingQueue.QueueArn()},
	}))
	if cfg.MCPAllowedOrigins != "" {
		st.API.AddEnvironment(s("MCP_ALLOWED_ORIGINS"), s(cfg.MCPAllowedOrigins), nil)
	}
	// The OTLP receiver: a function of its own, since the protobuf runtime
	// it links does not fit in the API function's bootstrap.
	st.Ingest = sb.function("IngestFunction", "ingest", "OTLP/HTTP traces receiver (POST /v1/traces): an instrumented agent's spans become its plans' execution events",
		APITimeoutS, true, map[string]string{"TRUST_AUTHORIZER": "true"}, func(p *awslambda.FunctionProps) { reserve(p, cfg.IngestConcurrency) })

	// The VERIFY signing key, when configured: every function that starts
	// the runtime (api, clock, stream) reads it at start.
	if cfg.SigningKeyParameter != "" {
		keyArn := stack.FormatArn(&awscdk.ArnComponents{
			Service: s("ssm"), Resource: s("parameter"), ResourceName: s(strings.TrimPrefix(cfg.SigningKeyParameter, "/")),
			ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
		})
		for _, fn := range []awslambda.Function{st.API, st.Clock, st.Stream, st.Grader, st.Ingest} {
			fn.AddEnvironment(s("SIGNING_KEY_PARAMETER"), s(cfg.SigningKeyParameter), nil)
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: s("ReadSigningKey"), Actions: strs("ssm:GetParameter"), Resources: &[]*string{keyArn},
			}))
		}
	}

	// Outbound credentials: the API function seals (a data key per secret),
	// only the functions that send lapse tasks open them.
	st.API.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("SealCredentials"), Actions: strs("kms:GenerateDataKey"), Resources: &[]*string{st.CredentialsKey.KeyArn()},
	}))
	for _, fn := range []awslambda.Function{st.Stream, st.Clock} {
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: s("OpenCredentials"), Actions: strs("kms:Decrypt"), Resources: &[]*string{st.CredentialsKey.KeyArn()},
		}))
	}
	sb.alerts()
}

// alerts grants what sending alert notifications needs: the clock function
// attempts them (timer-queue messages, the sweep), the API function sends
// a channel's test. Both open channel secrets (the API only those: the
// encryption context names the channel agent), and may send with SES from
// the configured identity and put events on the configured buses.
func (sb *stackBuilder) alerts() {
	st, cfg, stack := sb.st, sb.cfg, sb.st.Stack
	st.API.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: s("OpenChannelSecrets"), Actions: strs("kms:Decrypt"), Resources: &[]*string{st.CredentialsKey.KeyArn()},
		Conditions: &map[string]interface{}{
			"StringEquals": map[string]interface{}{"kms:EncryptionContext:clockwork:agent": ChannelSealAgent},
		},
	}))
	notifying := []awslambda.Function{st.API, st.Clock}
	for _, fn := range notifying {
		if cfg.PublicURL != "" {
			fn.AddEnvironment(s("PUBLIC_URL"), s(cfg.PublicURL), nil)
		}
	}
	// Every agent's scores go to the operator's scores channel: VERIFY
	// (the stream) and the repair of its effects (the clock) make them.
	if cfg.ScoresChannel != "" {
		for _, fn := range []awslambda.Function{st.Stream, st.Clock} {
			fn.AddEnvironment(s("SCORES_CHANNEL"), s(cfg.ScoresChannel), nil)
		}
	}
	// The stream function subscribes to watched tasks: their agents push
	// to the API at its public URL.
	if cfg.PublicURL != "" {
		st.Stream.AddEnvironment(s("PUBLIC_URL"), s(cfg.PublicURL), nil)
	}
	if cfg.SESFrom != "" {
		domain := cfg.SESFrom[strings.LastIndexByte(cfg.SESFrom, '@')+1:]
		var arns []*string
		for _, id := range []string{cfg.SESFrom, domain} {
			arns = append(arns, stack.FormatArn(&awscdk.ArnComponents{Service: s("ses"), Resource: s("identity"), ResourceName: s(id),
				ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME}))
		}
		for _, fn := range notifying {
			fn.AddEnvironment(s("SES_FROM"), s(cfg.SESFrom), nil)
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: s("SendAlertMail"), Actions: strs("ses:SendEmail"), Resources: &arns,
			}))
		}
	}
	if cfg.AlertEventBuses != "" {
		var arns []*string
		for _, b := range strings.Split(cfg.AlertEventBuses, ",") {
			arns = append(arns, stack.FormatArn(&awscdk.ArnComponents{Service: s("events"), Resource: s("event-bus"), ResourceName: s(b),
				ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME}))
		}
		for _, fn := range notifying {
			fn.AddEnvironment(s("EVENTBRIDGE_ALERTS"), s("true"), nil)
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: s("PutAlertEvents"), Actions: strs("events:PutEvents"), Resources: &arns,
			}))
		}
	}
}

// ChannelSealAgent is the agent under which internal/notify seals channel
// secrets (the KMS encryption context's clockwork:agent).
const ChannelSealAgent = "clockwork:channel"

// httpAPI adds the HTTP API: its stage, authorizers and routes.
func (sb *stackBuilder) httpAPI() {
	st := sb.st
	stack := sb.st.Stack
	cfg := sb.cfg

	// The HTTP API: explicit routes, default-route throttling, JSON access
	// logs (no headers, so no bearer tokens, are logged).
	st.HTTPAPI = awsapigatewayv2.NewHttpApi(stack, s("HttpApi"), &awsapigatewayv2.HttpApiProps{
		ApiName:            s(cfg.Name),
		Description:        s("clockwork HTTP API (" + cfg.Stage + ")"),
		CreateDefaultStage: b(false),
	})
	st.HTTPStage = awsapigatewayv2.NewHttpStage(stack, s("HttpApiStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    st.HTTPAPI,
		StageName:  s("$default"),
		AutoDeploy: b(true),
		Throttle:   &awsapigatewayv2.ThrottleSettings{RateLimit: n(float64(cfg.ThrottleRate)), BurstLimit: n(float64(cfg.ThrottleBurst))},
	})
	accessLogs := sb.logGroup("HttpApiAccessLogs")
	st.HTTPStage.Node().DefaultChild().(awsapigatewayv2.CfnStage).SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: accessLogs.LogGroupArn(),
		Format:         s(AccessLogFormat),
	})
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(s("ApiIntegration"), st.API, &awsapigatewayv2integrations.HttpLambdaIntegrationProps{
		PayloadFormatVersion:   awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
		ScopePermissionToRoute: b(false),
	})
	// A request without an Authorization header is answered 401, one the
	// authorizer refuses 403, both by API Gateway without invoking the API
	// function.
	authz := awsapigatewayv2authorizers.NewHttpLambdaAuthorizer(s("TokenAuthorizer"), st.Authorizer, &awsapigatewayv2authorizers.HttpLambdaAuthorizerProps{
		AuthorizerName:  s(cfg.Name + "-tokens"),
		ResponseTypes:   &[]awsapigatewayv2authorizers.HttpLambdaResponseType{awsapigatewayv2authorizers.HttpLambdaResponseType_SIMPLE},
		IdentitySource:  strs("$request.header.Authorization"),
		ResultsCacheTtl: awscdk.Duration_Seconds(n(AuthorizerCacheTTLS)),
	})
	// The push route (where A2A pushes land) takes the A2A 0.3 push
	// sender's X-A2A-Notification-Token as well as Authorization. API
	// Gateway refuses a request that lacks any identity source listed, so
	// that route has its own authorizer (the same function) with none and
	// no cache: it is invoked on every push and reads the headers itself
	// (internal/authorizer). A push without either header is refused by it
	// with 403.
	pushAuthz := awsapigatewayv2authorizers.NewHttpLambdaAuthorizer(s("PushAuthorizer"), st.Authorizer, &awsapigatewayv2authorizers.HttpLambdaAuthorizerProps{
		AuthorizerName:  s(cfg.Name + "-push-tokens"),
		ResponseTypes:   &[]awsapigatewayv2authorizers.HttpLambdaResponseType{awsapigatewayv2authorizers.HttpLambdaResponseType_SIMPLE},
		IdentitySource:  &[]*string{},
		ResultsCacheTtl: awscdk.Duration_Seconds(n(0)),
	})
	ingest := awsapigatewayv2integrations.NewHttpLambdaIntegration(s("IngestIntegration"), st.Ingest, &awsapigatewayv2integrations.HttpLambdaIntegrationProps{
		PayloadFormatVersion:   awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
		ScopePermissionToRoute: b(false),
	})
	for _, r := range Routes {
		opts := &awsapigatewayv2.AddRoutesOptions{
			Path: s(r.Path), Methods: &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)}, Integration: integration,
		}
		if r.Method+" "+r.Path == TracesRoute {
			opts.Integration = ingest
		}
		switch {
		case r.Public:
		case r.Method+" "+r.Path == PushRoute:
			opts.Authorizer = pushAuthz
		default:
			opts.Authorizer = authz
		}
		routes := st.HTTPAPI.AddRoutes(opts)
		if r.Public {
			// The stage's route settings name the route: it must exist first.
			for _, route := range *routes {
				st.HTTPStage.Node().AddDependency(route)
			}
		}
	}
	st.throttlePublicRoutes(cfg)
}
