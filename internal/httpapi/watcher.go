package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/watcher"
)

func (h *Handler) putCard(w http.ResponseWriter, r *http.Request) error {
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	card, err := h.Watcher.PutCard(r.Context(), r.PathValue("agentId"), b)
	if err != nil {
		return err
	}
	// Credentials are bound to where the card pointed when they were
	// stored: a card that now points elsewhere drops them (a send checks
	// the binding too, so a delivery racing this PUT sends nothing).
	if h.Credentials != nil {
		dropped, err := h.Credentials.DropUnbound(r.Context(), card)
		if err != nil {
			return err
		}
		if len(dropped) > 0 {
			names := make([]string, len(dropped))
			for i, d := range dropped {
				names[i] = d.Scheme
			}
			w.Header().Set(CredentialsDroppedHeader, strings.Join(names, ", "))
		}
	}
	writeJSON(w, http.StatusOK, json.RawMessage(card.Raw))
	return nil
}

// CredentialsDroppedHeader, on the answer to a card PUT, lists the schemes
// whose stored credentials the new card dropped (it points the A2A
// endpoint, or the scheme's token or discovery URL, elsewhere); GET
// /v1/agents/{agentId}/credentials says why.
const CredentialsDroppedHeader = "Clockwork-Credentials-Dropped"

func (h *Handler) getCard(w http.ResponseWriter, r *http.Request) error {
	card, err := h.Watcher.Card(r.Context(), r.PathValue("agentId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, json.RawMessage(card.Raw))
	return nil
}

type recordsResponse struct {
	Records   []*expect.Record `json:"records"`
	NextToken string           `json:"nextToken,omitempty"`
}

// The operations below are shared by each route and its MCP tool
// (tools.go): the arguments are the route's path parameters, query and
// body in one object.

type raiseArgs struct {
	AgentID string `json:"agentId"`
	expect.RaiseRequest
}

func (h *Handler) raise(w http.ResponseWriter, r *http.Request) error {
	in := raiseArgs{AgentID: r.PathValue("agentId")}
	if err := h.Decode(r, &in.RaiseRequest); err != nil {
		return err
	}
	out, err := h.raiseOp(r.Context(), &in)
	return respond(w, http.StatusOK, out, err)
}

func (h *Handler) raiseOp(ctx context.Context, in *raiseArgs) (recordsResponse, error) {
	if err := mayWatch(ctx, in.RaiseRequest); err != nil {
		return recordsResponse{}, err
	}
	recs, err := h.Watcher.Raise(ctx, in.AgentID, in.RaiseRequest)
	return recordsResponse{Records: recs}, err
}

// mayWatch refuses (403, naming the field) an expectation whose watchTask
// names an agent the caller may not act for: asking an agent about its
// tasks uses that agent's credentials.
func mayWatch(ctx context.Context, req expect.RaiseRequest) error {
	p := PrincipalOf(ctx)
	for i, e := range req.Expectations {
		if w := e.WatchTask; w != nil && w.AgentID != "" && !p.ActsFor(w.AgentID) {
			return &errs.Error{Code: errs.Forbidden, Message: fmt.Sprintf("token may not act for agent %q", w.AgentID),
				Fields: []errs.FieldError{{Path: fmt.Sprintf("expectations[%d].watchTask.agentId", i), Message: "names an agent this token may not act for"}}}
		}
	}
	return nil
}

type getArgs struct {
	AgentID       string `json:"agentId"`
	ExpectationID string `json:"expectationId"`
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) error {
	out, err := h.getOp(r.Context(), &getArgs{AgentID: r.PathValue("agentId"), ExpectationID: r.PathValue("expectationId")})
	return respond(w, http.StatusOK, out, err)
}

func (h *Handler) getOp(ctx context.Context, in *getArgs) (*expect.Record, error) {
	return h.Watcher.Get(ctx, in.AgentID, in.ExpectationID)
}

// listArgs are the listing's query parameters, by the same names.
type listArgs struct {
	AgentID     string `json:"agentId"`
	State       string `json:"state,omitempty"`
	SubjectType string `json:"subjectType,omitempty"`
	SubjectID   string `json:"subjectId,omitempty"`
	Limit       int    `json:"limit,omitempty"`
	NextToken   string `json:"nextToken,omitempty"`
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	out, err := h.listOp(r.Context(), &listArgs{AgentID: r.PathValue("agentId"),
		State: q.Get("state"), SubjectType: q.Get("subjectType"), SubjectID: q.Get("subjectId"),
		Limit: limit, NextToken: q.Get("nextToken")})
	return respond(w, http.StatusOK, out, err)
}

func (h *Handler) listOp(ctx context.Context, in *listArgs) (recordsResponse, error) {
	recs, next, err := h.Watcher.List(ctx, in.AgentID, watcher.ListFilter{
		State: in.State, SubjectType: in.SubjectType, SubjectID: in.SubjectID,
		Limit: in.Limit, NextToken: in.NextToken,
	})
	return recordsResponse{Records: recs, NextToken: next}, err
}

type factsRequest struct {
	Facts []expect.Fact `json:"facts"`
}

type factsArgs struct {
	AgentID string `json:"agentId"`
	factsRequest
}

type factsResponse struct {
	Facts []watcher.FactOutcome `json:"facts"`
}

func (h *Handler) facts(w http.ResponseWriter, r *http.Request) error {
	in := factsArgs{AgentID: r.PathValue("agentId")}
	if err := h.Decode(r, &in.factsRequest); err != nil {
		return err
	}
	out, err := h.factsOp(r.Context(), &in)
	return respond(w, http.StatusOK, out, err)
}

func (h *Handler) factsOp(ctx context.Context, in *factsArgs) (factsResponse, error) {
	out, err := h.Watcher.ReportFacts(ctx, in.AgentID, PrincipalOf(ctx).Name, in.Facts)
	return factsResponse{Facts: out}, err
}

type withdrawRequest struct {
	Withdraw []string `json:"withdraw"`
	Reason   string   `json:"reason,omitempty"`
}

type withdrawArgs struct {
	AgentID string `json:"agentId"`
	withdrawRequest
}

func (h *Handler) withdraw(w http.ResponseWriter, r *http.Request) error {
	in := withdrawArgs{AgentID: r.PathValue("agentId")}
	if err := h.Decode(r, &in.withdrawRequest); err != nil {
		return err
	}
	out, err := h.withdrawOp(r.Context(), &in)
	return respond(w, http.StatusOK, out, err)
}

func (h *Handler) withdrawOp(ctx context.Context, in *withdrawArgs) (recordsResponse, error) {
	recs, err := h.Watcher.Withdraw(ctx, in.AgentID, in.Withdraw, in.Reason)
	return recordsResponse{Records: recs}, err
}

func (h *Handler) redeliver(w http.ResponseWriter, r *http.Request) error {
	rec, err := h.Watcher.Redeliver(r.Context(), r.PathValue("agentId"), r.PathValue("expectationId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rec)
	return nil
}

// ackBody is the body of POST .../ack (optional).
type ackBody struct {
	Note string `json:"note"`
}

// acknowledge serves POST /v1/agents/{agentId}/expectations/{expectationId}/ack:
// scope expectations:write or channels:write for the agent.
func (h *Handler) acknowledge(w http.ResponseWriter, r *http.Request) error {
	p := PrincipalOf(r.Context())
	if !p.Can(auth.ExpectationsWrite) && !p.Can(auth.ChannelsWrite) {
		return errs.E(errs.Forbidden, "token lacks the %s or %s scope", auth.ExpectationsWrite, auth.ChannelsWrite)
	}
	// The body is optional: none is an acknowledgement without a note.
	var in ackBody
	if r.ContentLength != 0 {
		b, err := h.readBody(r)
		if err != nil && !(r.ContentLength < 0 && errs.Is(err, errs.Invalid) && len(b) == 0) {
			return err
		}
		if len(b) > 0 {
			if err := decodeStrict(b, &in); err != nil {
				return err
			}
		}
	}
	rec, err := h.Watcher.Acknowledge(r.Context(), r.PathValue("agentId"), r.PathValue("expectationId"), p.Name, in.Note)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rec)
	return nil
}

func (h *Handler) deadLetters(w http.ResponseWriter, r *http.Request) error {
	p := PrincipalOf(r.Context())
	out := []*expect.Record{}
	err := h.Watcher.ForEachDead(r.Context(), func(rec *expect.Record) error {
		if p.ActsFor(rec.AgentID) {
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The dead letters are sharded: put them back in lapse order.
	slices.SortStableFunc(out, func(a, b *expect.Record) int {
		return cmp.Or(strings.Compare(a.Lapse.LapsedAt, b.Lapse.LapsedAt), strings.Compare(a.AgentID, b.AgentID),
			strings.Compare(a.Expectation.ExpectationID, b.Expectation.ExpectationID))
	})
	out = out[:min(len(out), watcher.MaxPageSize)]
	writeJSON(w, http.StatusOK, recordsResponse{Records: out})
	return nil
}

var _ = auth.Read
