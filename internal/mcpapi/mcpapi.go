// Package mcpapi serves the API's tools (httpapi.Tool) to LLM agents over
// the Model Context Protocol, with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk): Streamable HTTP, stateless (no
// session: any instance answers any request, as Lambda needs) and JSON
// answers rather than event streams (a Lambda response is buffered whole).
//
// The tools are the HTTP routes called another way: httpapi authenticates
// and authorises the request (the same bearer tokens, scopes and agents),
// and each call goes through httpapi.Handler.CallTool, the same decoding and
// operation as its route. This package only adapts them to the SDK: the
// tool list with JSON schemas inferred from the routes' Go types (and, for
// bodies the service keeps as sent, the OpenAPI document's component
// schemas), results as structured content, errors as tool errors carrying
// the route's problem details.
package mcpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentclock/clockwork/internal/httpapi"
)

// Implementation names this server to MCP clients.
var Implementation = &mcp.Implementation{Name: "clockwork", Title: "clockwork: an external clock for AI agents", Version: "v1"}

// Instructions are sent to clients at initialisation.
const Instructions = "clockwork keeps time for agents. Raise expectations (what is expected of a subject, by when); report facts as " +
	"they are observed, which satisfy expectations by exact fact key; when an expectation lapses (overdue, skipped, stalled) " +
	"clockwork sends the agent a new A2A task. Declare an AIGP ANTICIPATE before a plan runs and submit its execution events; " +
	"PLAN_COMPLETE grades the execution. Errors are RFC 9457 problem details naming the failing field."

// Mount makes h serve the MCP endpoint at POST /mcp (h.MCP). It panics
// if a tool's schema cannot be built, which a test catches.
func Mount(h *httpapi.Handler) {
	h.MCP = New(h)
}

// New returns the MCP endpoint of h's tools, to be served behind h (which
// authenticates and authorises each request first).
func New(h *httpapi.Handler) http.Handler {
	s, err := NewServer(h)
	if err != nil {
		panic(err)
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		// httpapi has bounded the body already (the route's limit plus the
		// JSON-RPC envelope).
		MaxRequestBodyBytes: -1,
		Logger:              h.Log,
	})
}

// NewServer returns an MCP server with h's tools. An error says which
// tool's schema could not be built.
func NewServer(h *httpapi.Handler) (*mcp.Server, error) {
	s := mcp.NewServer(Implementation, &mcp.ServerOptions{Instructions: Instructions, Logger: h.Log})
	for _, t := range h.Tools() {
		tool, err := Describe(t)
		if err != nil {
			return nil, err
		}
		s.AddTool(tool, handler(h, t.Name, h.Log))
	}
	return s, nil
}

// Describe returns the MCP description of t: its name, title, description,
// annotations and the JSON schemas of its arguments and result.
func Describe(t httpapi.Tool) (*mcp.Tool, error) {
	in, err := InputSchema(t)
	if err != nil {
		return nil, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
	}
	out, err := OutputSchema(t)
	if err != nil {
		return nil, fmt.Errorf("tool %s: output schema: %w", t.Name, err)
	}
	if in.Type != "object" {
		return nil, fmt.Errorf("tool %s: input schema: type %q, but MCP requires an object schema", t.Name, in.Type)
	}
	no := false
	ann := &mcp.ToolAnnotations{Title: t.Title, ReadOnlyHint: t.ReadOnly, OpenWorldHint: &no}
	if !t.ReadOnly {
		// Raises, facts, withdrawals, declarations and events are
		// idempotent (by id, or by content); a withdrawal ends an
		// expectation for good, and so does a raise that supersedes one.
		destructive := t.Name == "withdraw_expectations" || t.Name == "raise_expectations"
		ann.DestructiveHint = &destructive
		ann.IdempotentHint = true
	}
	// Encoded once: the SDK re-reads the input schema on every call (for
	// x-mcp-header annotations), which costs far less from JSON text.
	inJSON, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
	}
	outJSON, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("tool %s: output schema: %w", t.Name, err)
	}
	return &mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description + " HTTP twin: " + t.Route + ".",
		InputSchema: json.RawMessage(inJSON), OutputSchema: json.RawMessage(outJSON), Annotations: ann}, nil
}

// OutputSchema returns the JSON schema of t's result, inferred from its Go
// type. MCP requires an object schema (the clients' SDKs refuse a tool
// list with any other, boolean schemas and ["null","object"] included), so
// a pointer result is described by what it points to (a tool answers an
// object or an error, never null), and a result that is not a struct is an
// error.
func OutputSchema(t httpapi.Tool) (*jsonschema.Schema, error) {
	typ := t.Output
	for typ != nil && typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == nil || typ.Kind() != reflect.Struct {
		return nil, fmt.Errorf("result type %v is not a struct, so its schema would not be an object schema", t.Output)
	}
	s, err := jsonschema.ForType(typ, nil)
	if err != nil {
		return nil, err
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("result type %v has schema type %q %v, but MCP requires an object schema", typ, s.Type, s.Types)
	}
	return s, nil
}

// handler calls the tool through the HTTP handler and answers its result as
// structured content (and the same JSON as text, for clients that read
// only text), or its error as a tool error whose text is the problem
// details the route would have answered.
func handler(h *httpapi.Handler, name string, log *slog.Logger) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		out, err := h.CallTool(ctx, name, req.Params.Arguments)
		if err != nil {
			p, internal := httpapi.ProblemOf(err)
			if internal {
				log.Error("tool call failed", "tool", name, "err", err)
			}
			b, _ := json.Marshal(p) // a Problem always encodes
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("encoding the result of %s: %w", name, err)
		}
		return &mcp.CallToolResult{StructuredContent: json.RawMessage(b), Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	}
}
