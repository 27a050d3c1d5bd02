package a2aout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/retry"
)

// The A2A 0.3 JSON-RPC binding of message/send, written out here rather
// than taken from the SDK's compatibility layer: that layer links the whole
// 0.3 SDK with gRPC and protobuf into every Lambda binary (over 20 MB),
// while one JSON-RPC call is all a lapse needs. The tests send it to a 0.3
// agent served by the SDK's own 0.3 server.

type rpc03Request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      string `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type rpc03Params struct {
	Message       msg03    `json:"message"`
	Configuration config03 `json:"configuration"`
}

type config03 struct {
	Blocking bool `json:"blocking"`
}

type part03 struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

type msg03 struct {
	Kind             string         `json:"kind"`
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Role             string         `json:"role"`
	Parts            []part03       `json:"parts"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	Metadata         map[string]any `json:"metadata,omitempty"`
}

type rpc03Response struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// codes03 maps JSON-RPC error codes of A2A 0.3 to the SDK's sentinels, so
// Permanent classifies them as it does for 1.0 agents.
var codes03 = map[int]error{
	-32700: a2a.ErrParseError,
	-32600: a2a.ErrInvalidRequest,
	-32601: a2a.ErrMethodNotFound,
	-32602: a2a.ErrInvalidParams,
	-32603: a2a.ErrInternalError,
	-32001: a2a.ErrTaskNotFound,
	-32002: a2a.ErrTaskNotCancelable,
	-32003: a2a.ErrPushNotificationNotSupported,
	-32004: a2a.ErrUnsupportedOperation,
	-32005: a2a.ErrUnsupportedContentType,
	-32006: a2a.ErrInvalidAgentResponse,
}

// send03 sends req to a 0.3 agent with message/send and returns the task
// id of the answer.
func (s *Sender) send03(ctx context.Context, card expect.Card, req *a2a.SendMessageRequest) (string, error) {
	m := req.Message
	out := msg03{Kind: "message", MessageID: m.ID, ContextID: m.ContextID, TaskID: string(m.TaskID), Role: "user",
		Extensions: m.Extensions, Metadata: m.Metadata}
	for _, p := range m.Parts {
		if t, ok := p.Content.(a2a.Text); ok {
			out.Parts = append(out.Parts, part03{Kind: "text", Text: string(t)})
		}
	}
	for _, r := range m.ReferenceTasks {
		out.ReferenceTaskIDs = append(out.ReferenceTaskIDs, string(r))
	}
	var res struct {
		Kind   string `json:"kind"`
		ID     string `json:"id"`
		TaskID string `json:"taskId"`
	}
	err := s.call03(ctx, card, "message/send", m.ID, rpc03Params{Message: out, Configuration: config03{Blocking: false}},
		map[string]string{"A2A-Extensions": expect.URI, "X-A2A-Extensions": expect.URI}, &res)
	if err != nil {
		return "", err
	}
	switch res.Kind {
	case "task":
		return res.ID, nil
	case "message":
		return res.TaskID, nil
	default:
		return "", fmt.Errorf("%w: result of kind %q", a2a.ErrInvalidAgentResponse, res.Kind)
	}
}

// call03 sends one JSON-RPC request of A2A 0.3 (method, id, params, and
// the extra headers) to card's endpoint and decodes its result into
// result. Errors: a status other than 200 is a *StatusError (with the
// agent's Retry-After); a JSON-RPC error matches the a2a package's
// sentinel for its code; an answer over MaxResponseBytes, undecodable or
// without a result matches a2a.ErrInvalidAgentResponse.
func (s *Sender) call03(ctx context.Context, card expect.Card, method, id string, params any, headers map[string]string, result any) error {
	body, err := json.Marshal(rpc03Request{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, card.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	for k, v := range headers {
		hreq.Header.Set(k, v)
	}
	hreq.Header.Set("A2A-Version", "0.3")
	res, err := s.http.Do(hreq)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, MaxResponseBytes+1))
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return &StatusError{StatusCode: res.StatusCode, RetryAfter: retry.ParseRetryAfter(res.Header.Get("Retry-After"), time.Now()),
			Err: fmt.Errorf("unexpected HTTP status %d", res.StatusCode)}
	}
	if len(raw) > MaxResponseBytes {
		return fmt.Errorf("%w: response larger than %d bytes", a2a.ErrInvalidAgentResponse, MaxResponseBytes)
	}
	var rr rpc03Response
	if err := json.Unmarshal(raw, &rr); err != nil {
		return fmt.Errorf("%w: %v", a2a.ErrInvalidAgentResponse, err)
	}
	if rr.Error != nil {
		sentinel, ok := codes03[rr.Error.Code]
		if !ok {
			sentinel = a2a.ErrInternalError
		}
		return fmt.Errorf("%w: JSON-RPC error %d: %s", sentinel, rr.Error.Code, rr.Error.Message)
	}
	if len(rr.Result) == 0 || string(rr.Result) == "null" {
		return fmt.Errorf("%w: no result", a2a.ErrInvalidAgentResponse)
	}
	if err := json.Unmarshal(rr.Result, result); err != nil {
		return fmt.Errorf("%w: %v", a2a.ErrInvalidAgentResponse, err)
	}
	return nil
}
