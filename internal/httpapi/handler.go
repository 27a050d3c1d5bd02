// Package httpapi is the HTTP API as one net/http handler, served by the
// local server and, through API Gateway, by the API Lambda. Handlers only
// decode, authorise, call a service and encode; every rule lives in the
// domain packages, and every error status is decided in problem.go.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/credentials"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/heartbeat"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/notify"
	"github.com/agentclock/clockwork/internal/watcher"
)

// DefaultMaxBody bounds a request body.
const DefaultMaxBody = 1 << 20

// Authenticator returns the principal a request is authenticated as, or
// false, which the handler answers with 401. *auth.Authenticator checks the
// bearer token itself; on AWS the API function trusts what the API Gateway
// Lambda authorizer decided (internal/authorizer.Gateway).
type Authenticator interface {
	AuthenticateRequest(r *http.Request) (*auth.Principal, bool)
}

// Handler serves the API.
type Handler struct {
	Watcher *watcher.Service
	Eval    *evaluation.Service
	// Credentials keeps agents' outbound credentials; nil answers the
	// credentials routes with 503.
	Credentials *credentials.Service
	// Notify keeps alert channels and rules; nil answers their routes
	// with 503.
	Notify  *notify.Service
	Auth    Authenticator
	Log     *slog.Logger
	MaxBody int64
	// MaxBundleBytes bounds an evidence bundle's response (0: streamed,
	// unbounded); see LambdaBundleBytes.
	MaxBundleBytes int64
	// MCP serves POST /mcp once the handler has authorised the request
	// (internal/mcpapi.Mount sets it; nil answers 404).
	MCP http.Handler
	// MCPAllowedOrigins are the browser origins ("https://host:port") that
	// may call /mcp. A request whose Origin header is present and not
	// listed is refused with 403 (the MCP specification's defence against
	// DNS rebinding); requests without Origin (non-browser clients) are
	// served. Empty: no browser origin is allowed.
	MCPAllowedOrigins []string
	// Traces receives OTLP traces at POST /v1/traces (internal/otlpin.Mount
	// sets it; nil answers 404: on AWS an ingest function of its own
	// serves the route, which keeps protobuf out of the API function).
	Traces TracesExporter
	// Console serves the web console at /console; nil answers its routes
	// with 404 (the Lambdas that are not the API do not link it).
	Console ConsoleAssets
	// Metrics counts requests by route template and status and times
	// them (nil: none).
	Metrics metrics.Recorder

	mux      *http.ServeMux
	patterns []string
	// tracesLimits and tracesSlots bound POST /v1/traces (SetTracesLimits).
	tracesLimits TracesLimits
	tracesSlots  chan struct{}
	tracesOnce   sync.Once
}

// route is one entry of the routes table: a ServeMux pattern, the scope it
// needs ("" when the handler decides, as /a2a does by content) and how it is
// authenticated.
type route struct {
	Pattern string
	Scope   auth.Scope
	// Public routes need no token.
	Public bool
	// Agent routes also check that the token may act for {agentId}.
	Agent bool
	// Eval routes belong to the evaluation loop and exist only when it does.
	Eval bool
	// Push routes are where A2A pushes land: they also take the A2A 0.3
	// push sender's X-A2A-Notification-Token as the credential
	// (auth.PushCredential).
	Push bool
	fn   func(http.ResponseWriter, *http.Request) error
}

// routes is the API: every route the handler serves, in one place. The mux
// is built from it, and openapi.json must document exactly these patterns
// (TestOpenAPIMatchesRoutes).
func (h *Handler) routes() []route {
	return []route{
		{Pattern: "GET /healthz", Public: true, fn: h.health},
		{Pattern: "GET /openapi.json", Public: true, fn: h.openAPI},
		{Pattern: "PUT /v1/agents/{agentId}", Scope: auth.AgentsWrite, Agent: true, fn: h.putCard},
		{Pattern: "GET /v1/agents/{agentId}", Scope: auth.Read, Agent: true, fn: h.getCard},
		{Pattern: "DELETE /v1/agents/{agentId}", Scope: auth.AgentsWrite, Agent: true, fn: h.eraseAgent},
		{Pattern: "POST /v1/agents/{agentId}/expectations", Scope: auth.ExpectationsWrite, Agent: true, fn: h.raise},
		{Pattern: "GET /v1/agents/{agentId}/expectations", Scope: auth.Read, Agent: true, fn: h.list},
		{Pattern: "GET /v1/agents/{agentId}/expectations/{expectationId}", Scope: auth.Read, Agent: true, fn: h.get},
		{Pattern: "POST /v1/agents/{agentId}/expectations/{expectationId}/redeliver", Scope: auth.ExpectationsWrite, Agent: true, fn: h.redeliver},
		// Either scope: the agent's owner, or the on-call people who
		// hold channels:write for it (the handler checks which).
		{Pattern: "POST /v1/agents/{agentId}/expectations/{expectationId}/ack", Agent: true, fn: h.acknowledge},
		{Pattern: "POST /v1/agents/{agentId}/facts", Scope: auth.FactsWrite, Agent: true, fn: h.facts},
		{Pattern: "POST /v1/agents/{agentId}/withdrawals", Scope: auth.ExpectationsWrite, Agent: true, fn: h.withdraw},
		{Pattern: "POST /v1/agents/{agentId}/a2a", Agent: true, Push: true, fn: h.a2a},
		// Where watched tasks' agents push: the subscription's own token
		// is the credential (watches.go).
		{Pattern: "POST /v1/watches/{agentId}/{expectationId}", Public: true, fn: h.watchPush},
		{Pattern: "PUT /v1/agents/{agentId}/heartbeats/{name}", Scope: auth.ExpectationsWrite, Agent: true, fn: h.putHeartbeat},
		{Pattern: "GET /v1/agents/{agentId}/heartbeats", Scope: auth.Read, Agent: true, fn: h.listHeartbeats},
		{Pattern: "GET /v1/agents/{agentId}/heartbeats/{name}", Scope: auth.Read, Agent: true, fn: h.getHeartbeat},
		{Pattern: "DELETE /v1/agents/{agentId}/heartbeats/{name}", Scope: auth.ExpectationsWrite, Agent: true, fn: h.deleteHeartbeat},
		{Pattern: "POST /v1/agents/{agentId}/heartbeats/{name}/pause", Scope: auth.ExpectationsWrite, Agent: true, fn: h.pauseHeartbeat},
		{Pattern: "POST /v1/agents/{agentId}/heartbeats/{name}/resume", Scope: auth.ExpectationsWrite, Agent: true, fn: h.resumeHeartbeat},
		{Pattern: "POST /v1/agents/{agentId}/heartbeats/{name}/ping", Scope: auth.FactsWrite, Agent: true, fn: h.ping(heartbeat.Success)},
		{Pattern: "POST /v1/agents/{agentId}/heartbeats/{name}/ping/start", Scope: auth.FactsWrite, Agent: true, fn: h.ping(heartbeat.Start)},
		{Pattern: "POST /v1/agents/{agentId}/heartbeats/{name}/ping/fail", Scope: auth.FactsWrite, Agent: true, fn: h.ping(heartbeat.Fail)},
		{Pattern: "PUT /v1/agents/{agentId}/credentials", Scope: auth.AgentsWrite, Agent: true, fn: h.putCredentials},
		{Pattern: "GET /v1/agents/{agentId}/credentials", Scope: auth.Read, Agent: true, fn: h.getCredentials},
		{Pattern: "DELETE /v1/agents/{agentId}/credentials", Scope: auth.AgentsWrite, Agent: true, fn: h.deleteCredentials},
		{Pattern: "GET /v1/deadletters", Scope: auth.Read, fn: h.deadLetters},
		{Pattern: "PUT /v1/channels/{channelId}", Scope: auth.ChannelsWrite, fn: h.putChannel},
		{Pattern: "GET /v1/channels", Scope: auth.Read, fn: h.listChannels},
		{Pattern: "GET /v1/channels/{channelId}", Scope: auth.Read, fn: h.getChannel},
		{Pattern: "DELETE /v1/channels/{channelId}", Scope: auth.ChannelsWrite, fn: h.deleteChannel},
		{Pattern: "POST /v1/channels/{channelId}/test", Scope: auth.ChannelsWrite, fn: h.testChannel},
		{Pattern: "GET /v1/channels/{channelId}/deadletters", Scope: auth.Read, fn: h.channelDeadLetters},
		{Pattern: "POST /v1/channels/{channelId}/deadletters/{notificationId}/replay", Scope: auth.ChannelsWrite, fn: h.replayNotification},
		{Pattern: "PUT /v1/silences/{silenceId}", Scope: auth.ChannelsWrite, fn: h.putSilence},
		{Pattern: "GET /v1/silences", Scope: auth.Read, fn: h.listSilences},
		{Pattern: "GET /v1/silences/{silenceId}", Scope: auth.Read, fn: h.getSilence},
		{Pattern: "DELETE /v1/silences/{silenceId}", Scope: auth.ChannelsWrite, fn: h.deleteSilence},
		{Pattern: "PUT /v1/agents/{agentId}/alerts", Scope: auth.AgentsWrite, Agent: true, fn: h.putAlerts},
		{Pattern: "GET /v1/agents/{agentId}/alerts", Scope: auth.Read, Agent: true, fn: h.getAlerts},
		{Pattern: "DELETE /v1/agents/{agentId}/alerts", Scope: auth.AgentsWrite, Agent: true, fn: h.deleteAlerts},
		{Pattern: "GET /v1/agents/{agentId}/notifications", Scope: auth.Read, Agent: true, fn: h.listNotifications},
		{Pattern: "POST /v1/anticipations", Scope: auth.AnticipationsWrite, Eval: true, fn: h.declare},
		{Pattern: "PUT /v1/anticipations/{id}", Scope: auth.AnticipationsWrite, Eval: true, fn: h.replace},
		{Pattern: "GET /v1/anticipations/{id}", Scope: auth.Read, Eval: true, fn: h.getAnticipation},
		{Pattern: "GET /v1/anticipations/{id}/verifications", Scope: auth.Read, Eval: true, fn: h.listVerifications},
		{Pattern: "POST /v1/executions/{planId}/events", Scope: auth.EventsWrite, Eval: true, fn: h.appendEvent},
		{Pattern: "GET /v1/executions/{planId}/events", Scope: auth.Read, Eval: true, fn: h.listEvents},
		{Pattern: "GET /v1/verifications/{verificationId}", Scope: auth.Read, Eval: true, fn: h.getVerification},
		{Pattern: "GET /v1/verifications/{verificationId}/bundle", Scope: auth.Read, Eval: true, fn: h.bundle},
		{Pattern: "POST /v1/verifications/{verificationId}/grades", Scope: auth.GradesWrite, Eval: true, fn: h.grade},
		{Pattern: "GET /v1/keys/verify", Scope: auth.Read, Eval: true, fn: h.verifyKey},
		// Re-grading stored executions (evaluations.go).
		{Pattern: "POST /v1/evaluations", Scope: auth.GradesWrite, Eval: true, fn: h.startEvaluation},
		{Pattern: "GET /v1/evaluations/{evaluationId}", Scope: auth.Read, Eval: true, fn: h.getEvaluation},
		{Pattern: "GET /v1/agents/{agentId}/evaluations", Scope: auth.Read, Agent: true, Eval: true, fn: h.listEvaluations},
		// Online evaluators (evaluators.go).
		{Pattern: "PUT /v1/agents/{agentId}/evaluators/{name}", Scope: auth.GradesWrite, Agent: true, Eval: true, fn: h.putEvaluator},
		{Pattern: "GET /v1/agents/{agentId}/evaluators", Scope: auth.Read, Agent: true, Eval: true, fn: h.listEvaluators},
		{Pattern: "GET /v1/agents/{agentId}/evaluators/{name}", Scope: auth.Read, Agent: true, Eval: true, fn: h.getEvaluator},
		{Pattern: "DELETE /v1/agents/{agentId}/evaluators/{name}", Scope: auth.GradesWrite, Agent: true, Eval: true, fn: h.deleteEvaluator},
		{Pattern: "GET /v1/agents/{agentId}/evaluators/{name}/verifications", Scope: auth.Read, Agent: true, Eval: true, fn: h.listEvaluatorVerifications},
		// Human review queues (reviews.go).
		{Pattern: "PUT /v1/review-queues/{queueId}", Scope: auth.GradesWrite, Eval: true, fn: h.putReviewQueue},
		{Pattern: "GET /v1/review-queues", Scope: auth.Read, Eval: true, fn: h.listReviewQueues},
		{Pattern: "GET /v1/review-queues/{queueId}", Scope: auth.Read, Eval: true, fn: h.getReviewQueue},
		{Pattern: "DELETE /v1/review-queues/{queueId}", Scope: auth.GradesWrite, Eval: true, fn: h.deleteReviewQueue},
		{Pattern: "GET /v1/review-queues/{queueId}/items", Scope: auth.Read, Eval: true, fn: h.listReviewItems},
		{Pattern: "GET /v1/review-queues/{queueId}/items/{itemId}", Scope: auth.Read, Eval: true, fn: h.getReviewItem},
		{Pattern: "POST /v1/review-queues/{queueId}/items/{itemId}/reviews", Scope: auth.GradesWrite, Eval: true, fn: h.postReview},
		{Pattern: "GET /v1/review-queues/{queueId}/agreement", Scope: auth.Read, Eval: true, fn: h.getReviewAgreement},
		{Pattern: "POST /v1/traces", Scope: auth.EventsWrite, Eval: true, fn: h.traces},
		// The MCP endpoint: each tools/call is authorised like its route (tools.go).
		{Pattern: "POST /mcp", fn: h.mcp},
		// The web console (public static files; its data comes through the
		// routes above with the token the person enters) and its listings.
		{Pattern: "GET /console", Public: true, fn: h.consolePage},
		{Pattern: "GET /console/{asset}", Public: true, fn: h.consoleAsset},
		{Pattern: "GET /v1/agents", Scope: auth.Read, fn: h.listAgents},
		{Pattern: "GET /v1/agents/{agentId}/anticipations", Scope: auth.Read, Agent: true, Eval: true, fn: h.listAnticipations},
	}
}

// New builds the handler and its routes: the watcher's, and the evaluation
// loop's when eval is not nil.
func New(w *watcher.Service, eval *evaluation.Service, a Authenticator, log *slog.Logger) *Handler {
	h := &Handler{Watcher: w, Eval: eval, Auth: a, Log: log, MaxBody: DefaultMaxBody}
	mux := http.NewServeMux()
	for _, rt := range h.routes() {
		if rt.Eval && eval == nil {
			continue
		}
		h.patterns = append(h.patterns, rt.Pattern)
		rt.fn = checkText(rt.Pattern, rt.fn)
		switch {
		case rt.Public:
			fn := rt.fn
			mux.HandleFunc(rt.Pattern, func(w http.ResponseWriter, r *http.Request) {
				if err := fn(w, r); err != nil {
					writeError(w, r, h.Log, err)
				}
			})
		case rt.Agent && rt.Push:
			mux.Handle(rt.Pattern, pushCredential(h.agent(rt.Scope, rt.fn)))
		case rt.Agent:
			mux.Handle(rt.Pattern, h.agent(rt.Scope, rt.fn))
		default:
			mux.Handle(rt.Pattern, h.authed(rt.Scope, rt.fn))
		}
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mcp" {
			// The stateless MCP endpoint offers no event stream to GET (nor
			// a session to DELETE): 405, as the Streamable HTTP transport asks.
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, r, h.Log, errs.E(errs.MethodNotAllowed, "%s /mcp: the MCP endpoint is stateless and takes POST only", r.Method))
			return
		}
		writeError(w, r, h.Log, errs.E(errs.NotFound, "no route for %s %s", r.Method, r.URL.Path))
	})
	h.mux = mux
	return h
}

// Patterns returns the ServeMux patterns the handler serves, in the order
// they were registered (the catch-all "/" that answers 404 excluded).
func (h *Handler) Patterns() []string { return append([]string(nil), h.patterns...) }

func (h *Handler) health(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// ServeHTTP serves one request; a panic in a handler is answered as an
// internal error rather than crashing the process.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w, status: 200}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.Log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", v)
			writeError(sw, r, h.Log, errs.E(errs.Internal, "internal error"))
		}
		h.measure(r, sw.status, start)
	}()
	h.mux.ServeHTTP(sw, r)
	if h.Log.Enabled(r.Context(), slog.LevelDebug) {
		h.Log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "client", r.RemoteAddr, "ms", float64(time.Since(start).Microseconds())/1000)
	}
}

// measure counts a served request under its route template (the pattern
// the mux matched, so that the label's values are bounded) and status.
func (h *Handler) measure(r *http.Request, status int, start time.Time) {
	if h.Metrics == nil {
		return
	}
	route := r.Pattern
	if route == "" || route == "/" {
		route = "unmatched"
	}
	h.Metrics.Record(metrics.HTTPRequests, 1, route, strconv.Itoa(status))
	h.Metrics.Record(metrics.HTTPLatency, time.Since(start).Seconds(), route)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }

type principalKey struct{}

// PrincipalOf returns the authenticated principal of a request.
func PrincipalOf(ctx context.Context) *auth.Principal {
	p, _ := ctx.Value(principalKey{}).(*auth.Principal)
	return p
}

// Require checks that the request's principal holds scope (and, when
// agentID is not empty, may act for it).
func Require(ctx context.Context, scope auth.Scope, agentID string) error {
	p := PrincipalOf(ctx)
	if p == nil {
		return errs.E(errs.Unauthorized, "a bearer token is required")
	}
	if scope != "" && !p.Can(scope) {
		return errs.E(errs.Forbidden, "token lacks the %s scope", scope)
	}
	if agentID != "" && !p.ActsFor(agentID) {
		return errs.E(errs.Forbidden, "token may not act for agent %q", agentID)
	}
	return nil
}

// authed wraps fn with authentication and a scope check.
func (h *Handler) authed(scope auth.Scope, fn func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := h.Auth.AuthenticateRequest(r)
		if !ok {
			writeError(w, r, h.Log, errs.E(errs.Unauthorized, "a valid bearer token is required"))
			return
		}
		ctx := context.WithValue(r.Context(), principalKey{}, p)
		r = r.WithContext(ctx)
		if scope != "" {
			if err := Require(ctx, scope, ""); err != nil {
				writeError(w, r, h.Log, err)
				return
			}
		}
		if err := fn(w, r); err != nil {
			writeError(w, r, h.Log, err)
		}
	})
}

// pushCredential lets next authenticate a request that carries its token in
// auth.NotificationTokenHeader instead of Authorization (as A2A 0.3 push
// senders do): the token is presented to the authenticator as the bearer
// token. A request with an Authorization header is authenticated by that
// header alone.
func pushCredential(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			if c := auth.PushCredential("", r.Header.Get(auth.NotificationTokenHeader)); c != "" {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", c)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// agent is authed plus a check that the principal may act for the path's
// agent.
func (h *Handler) agent(scope auth.Scope, fn func(http.ResponseWriter, *http.Request) error) http.Handler {
	return h.authed(scope, func(w http.ResponseWriter, r *http.Request) error {
		agentID := r.PathValue("agentId")
		if msg := expect.ValidID(agentID); msg != "" {
			return errs.Fields("invalid agent id", []errs.FieldError{{Path: "agentId", Message: msg}})
		}
		if err := Require(r.Context(), "", agentID); err != nil {
			return err
		}
		return fn(w, r)
	})
}

// Decode reads and strictly decodes a JSON body into v.
func (h *Handler) Decode(r *http.Request, v any) error {
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	return decodeStrict(b, v)
}

func queryInt(r *http.Request, name string) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, errs.Fields("invalid query", []errs.FieldError{{Path: name, Message: "must be an integer"}})
	}
	return n, nil
}
