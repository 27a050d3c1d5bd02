package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
)

// The A2A shapes this endpoint reads: a StreamResponse (one of task,
// message, statusUpdate, artifactUpdate; the 1.0 form) or a bare Task (also
// accepted with 0.3 "kind" discriminators). Only what the extension needs
// is decoded; everything else is ignored.
type a2aEnvelope struct {
	Task           *a2aTask   `json:"task"`
	Message        *a2aMsg    `json:"message"`
	StatusUpdate   *a2aStatus `json:"statusUpdate"`
	ArtifactUpdate *a2aArtUpd `json:"artifactUpdate"`
	// Bare task / 0.3 event fields.
	Kind      string        `json:"kind"`
	ID        string        `json:"id"`
	TaskID    string        `json:"taskId"`
	ContextID string        `json:"contextId"`
	Status    *a2aTaskState `json:"status"`
	Artifacts []a2aArtifact `json:"artifacts"`
	Artifact  *a2aArtifact  `json:"artifact"`
	Metadata  metadata      `json:"metadata"`
	MessageID string        `json:"messageId"`
}

type metadata map[string]json.RawMessage

type a2aTask struct {
	ID        string        `json:"id"`
	ContextID string        `json:"contextId"`
	Status    *a2aTaskState `json:"status"`
	Artifacts []a2aArtifact `json:"artifacts"`
	Metadata  metadata      `json:"metadata"`
}

type a2aTaskState struct {
	State   string  `json:"state"`
	Message *a2aMsg `json:"message"`
}

type a2aMsg struct {
	TaskID    string   `json:"taskId"`
	ContextID string   `json:"contextId"`
	Metadata  metadata `json:"metadata"`
}

type a2aStatus struct {
	TaskID    string        `json:"taskId"`
	ContextID string        `json:"contextId"`
	Status    *a2aTaskState `json:"status"`
}

type a2aArtifact struct {
	Metadata metadata `json:"metadata"`
}

type a2aArtUpd struct {
	TaskID    string       `json:"taskId"`
	ContextID string       `json:"contextId"`
	Artifact  *a2aArtifact `json:"artifact"`
}

// extData is the extension's metadata block.
type extData struct {
	Expectations []expect.Expectation `json:"expectations"`
	Facts        []expect.Fact        `json:"facts"`
	Withdraw     []string             `json:"withdraw"`
	Skill        string               `json:"skill"`
}

type extBlock struct {
	path string
	data extData
}

func canceled(state string) bool {
	s := strings.ToLower(state)
	return s == "task_state_canceled" || s == "canceled" || s == "cancelled"
}

// activations returns the headers through which the request activated the
// extension: A2A-Extensions (1.0) and its 0.3 spelling X-A2A-Extensions,
// each when it names the extension's URI.
func activations(r *http.Request) []string {
	var out []string
	for _, h := range []string{"A2A-Extensions", "X-A2A-Extensions"} {
	values:
		for _, v := range r.Header.Values(h) {
			for _, u := range strings.Split(v, ",") {
				if strings.TrimSpace(u) == expect.URI {
					out = append(out, h)
					break values
				}
			}
		}
	}
	return out
}

type a2aResult struct {
	TaskID    string            `json:"taskId,omitempty"`
	Raised    []*expect.Record  `json:"raised"`
	Facts     []factOutcomeJSON `json:"facts"`
	Withdrawn []*expect.Record  `json:"withdrawn"`
	Canceled  []*expect.Record  `json:"canceled"`
}

type factOutcomeJSON struct {
	FactKey   string   `json:"factKey"`
	Satisfied []string `json:"satisfied"`
	Refuted   []string `json:"refuted,omitempty"`
}

// a2a reads the extension's metadata from an A2A payload pushed by (or on
// behalf of) the agent: expectations raised in artifacts or in a status
// message, facts in artifacts and messages, withdrawals in artifacts, and a
// canceled task status, which withdraws the task's open expectations.
// The metadata is read whether or not the extension was activated (the
// data is keyed by the extension URI); when it was, the response echoes the
// activation as A2A-Extensions and also in the spelling the request used
// (X-A2A-Extensions for an A2A 0.3 client).
func (h *Handler) a2a(w http.ResponseWriter, r *http.Request) error {
	if act := activations(r); len(act) > 0 {
		w.Header().Set("A2A-Extensions", expect.URI)
		for _, hdr := range act {
			w.Header().Set(hdr, expect.URI)
		}
	}
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	var env a2aEnvelope
	if err := json.Unmarshal(b, &env); err != nil {
		return jsonErrorIn(b, err)
	}
	var blocks []extBlock
	var taskID, contextID, state string
	addMeta := func(path string, m metadata) error {
		raw, ok := m[expect.URI]
		if !ok {
			return nil
		}
		var d extData
		if err := decodeStrict(raw, &d); err != nil {
			var e *errs.Error
			if ee, ok := err.(*errs.Error); ok {
				e = ee
				for i := range e.Fields {
					e.Fields[i].Path = joinPath(path+".metadata[\""+expect.URI+"\"]", e.Fields[i].Path)
				}
				return e
			}
			return err
		}
		blocks = append(blocks, extBlock{path: path + ".metadata[\"" + expect.URI + "\"]", data: d})
		return nil
	}
	addArtifacts := func(path string, arts []a2aArtifact) error {
		for i, a := range arts {
			if err := addMeta(fmt.Sprintf("%s[%d]", path, i), a.Metadata); err != nil {
				return err
			}
		}
		return nil
	}
	switch {
	case env.Task != nil:
		t := env.Task
		taskID, contextID = t.ID, t.ContextID
		if err := addArtifacts("task.artifacts", t.Artifacts); err != nil {
			return err
		}
		if t.Status != nil {
			state = t.Status.State
			if t.Status.Message != nil {
				if err := addMeta("task.status.message", t.Status.Message.Metadata); err != nil {
					return err
				}
			}
		}
	case env.Message != nil:
		taskID, contextID = env.Message.TaskID, env.Message.ContextID
		if err := addMeta("message", env.Message.Metadata); err != nil {
			return err
		}
	case env.StatusUpdate != nil:
		u := env.StatusUpdate
		taskID, contextID = u.TaskID, u.ContextID
		if u.Status != nil {
			state = u.Status.State
			if u.Status.Message != nil {
				if err := addMeta("statusUpdate.status.message", u.Status.Message.Metadata); err != nil {
					return err
				}
			}
		}
	case env.ArtifactUpdate != nil:
		u := env.ArtifactUpdate
		taskID, contextID = u.TaskID, u.ContextID
		if u.Artifact != nil {
			if err := addMeta("artifactUpdate.artifact", u.Artifact.Metadata); err != nil {
				return err
			}
		}
	case env.Kind == "status-update":
		taskID, contextID = env.TaskID, env.ContextID
		if env.Status != nil {
			state = env.Status.State
			if env.Status.Message != nil {
				if err := addMeta("status.message", env.Status.Message.Metadata); err != nil {
					return err
				}
			}
		}
	case env.Kind == "artifact-update":
		taskID, contextID = env.TaskID, env.ContextID
		if env.Artifact != nil {
			if err := addMeta("artifact", env.Artifact.Metadata); err != nil {
				return err
			}
		}
	case env.Kind == "message" || (env.MessageID != "" && env.ID == ""):
		taskID, contextID = env.TaskID, env.ContextID
		if err := addMeta("", env.Metadata); err != nil {
			return err
		}
	case env.ID != "" && (env.Status != nil || env.Kind == "task"):
		taskID, contextID = env.ID, env.ContextID
		if err := addArtifacts("artifacts", env.Artifacts); err != nil {
			return err
		}
		if env.Status != nil {
			state = env.Status.State
			if env.Status.Message != nil {
				if err := addMeta("status.message", env.Status.Message.Metadata); err != nil {
					return err
				}
			}
		}
	default:
		return errs.Fields("not an A2A payload", []errs.FieldError{{Path: "", Message: "expected a StreamResponse (task, message, statusUpdate or artifactUpdate) or a Task"}})
	}

	ctx := r.Context()
	agentID := r.PathValue("agentId")
	var raise expect.RaiseRequest
	var facts []expect.Fact
	var withdraw []string
	for _, b := range blocks {
		raise.Expectations = append(raise.Expectations, b.data.Expectations...)
		if b.data.Skill != "" {
			raise.Skill = b.data.Skill
		}
		facts = append(facts, b.data.Facts...)
		withdraw = append(withdraw, b.data.Withdraw...)
	}
	// Authorise everything first, so a refused part changes nothing.
	if len(raise.Expectations) > 0 || len(withdraw) > 0 || canceled(state) {
		if err := Require(ctx, auth.ExpectationsWrite, agentID); err != nil {
			return err
		}
	}
	if len(facts) > 0 {
		if err := Require(ctx, auth.FactsWrite, agentID); err != nil {
			return err
		}
	}
	if len(blocks) == 0 && !canceled(state) {
		if err := Require(ctx, auth.Read, agentID); err != nil {
			return err
		}
	}
	// Validate facts and withdrawals, their per-request bounds included,
	// before raising, so a refused part changes nothing.
	maxN := h.Watcher.Config().MaxPerRequest
	if len(facts) > 0 {
		var c errs.Collector
		if len(facts) > maxN {
			c.Add("facts", "holds more than %d facts", maxN)
		}
		for i, f := range facts {
			expect.ValidateFact(&c, fmt.Sprintf("facts[%d]", i), f, h.Watcher.Now(), h.Watcher.Config())
		}
		if err := c.Err("invalid facts"); err != nil {
			return err
		}
	}
	if len(withdraw) > 0 {
		var c errs.Collector
		if len(withdraw) > maxN {
			c.Add("withdraw", "names more than %d expectations", maxN)
		}
		for i, id := range withdraw {
			if msg := expect.ValidID(id); msg != "" {
				c.Add(fmt.Sprintf("withdraw[%d]", i), "%s", msg)
			}
		}
		if err := c.Err("invalid withdrawal"); err != nil {
			return err
		}
		// An unknown or settled expectation would refuse the withdrawal
		// after the raise had committed: refuse it first. (An expectation
		// raised by this same payload is open once raised.)
		raised := map[string]bool{}
		for _, e := range raise.Expectations {
			raised[e.ExpectationID] = true
		}
		for _, id := range withdraw {
			if raised[id] {
				continue
			}
			rec, err := h.Watcher.Get(ctx, agentID, id)
			if err != nil {
				return err
			}
			if _, _, err := expect.Withdraw(rec, "", h.Watcher.Now()); err != nil {
				return err
			}
		}
	}
	res := a2aResult{TaskID: taskID, Raised: []*expect.Record{}, Facts: []factOutcomeJSON{}, Withdrawn: []*expect.Record{}, Canceled: []*expect.Record{}}
	if len(raise.Expectations) > 0 {
		raise.TaskID, raise.ContextID = taskID, contextID
		if err := mayWatch(ctx, raise); err != nil {
			return err
		}
		recs, err := h.Watcher.Raise(ctx, agentID, raise)
		if err != nil {
			return err
		}
		res.Raised = recs
	}
	if len(facts) > 0 {
		outs, err := h.Watcher.ReportFacts(ctx, agentID, PrincipalOf(ctx).Name, facts)
		if err != nil {
			return err
		}
		for _, o := range outs {
			res.Facts = append(res.Facts, factOutcomeJSON(o))
		}
	}
	if len(withdraw) > 0 {
		recs, err := h.Watcher.Withdraw(ctx, agentID, withdraw, "withdrawn by the agent")
		if err != nil {
			return err
		}
		res.Withdrawn = recs
	}
	if canceled(state) && taskID != "" {
		recs, err := h.Watcher.TaskCanceled(ctx, agentID, taskID)
		if err != nil {
			return err
		}
		res.Canceled = recs
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func joinPath(prefix, p string) string {
	if p == "" {
		return prefix
	}
	return prefix + "." + p
}
