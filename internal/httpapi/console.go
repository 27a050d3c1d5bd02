package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/agentclock/clockwork/internal/errs"
)

// ConsoleAssets are the web console's static files (package console, which
// embeds them). Only the binaries that serve the console link it: the API
// Lambda and the local server.
type ConsoleAssets interface {
	// Asset returns the file called name ("" is the console's page) and its
	// media type, or false when there is no such file.
	Asset(name string) (body []byte, contentType string, ok bool)
}

// consoleCSP keeps the console to its own origin: its scripts and styles
// are its own files (no inline code, no CDN), and it reaches nothing but
// this API. The token lives in sessionStorage, so injected script is the
// one thing to keep out.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (h *Handler) consolePage(w http.ResponseWriter, r *http.Request) error {
	return h.serveConsole(w, "")
}

func (h *Handler) consoleAsset(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("asset")
	if name == "" {
		return errs.E(errs.NotFound, "the console is at /console")
	}
	return h.serveConsole(w, name)
}

func (h *Handler) serveConsole(w http.ResponseWriter, name string) error {
	if h.Console == nil {
		return errs.E(errs.NotFound, "this server does not serve the console")
	}
	body, ctype, ok := h.Console.Asset(name)
	if !ok {
		return errs.E(errs.NotFound, "the console has no file %q", name)
	}
	hd := w.Header()
	hd.Set("Content-Type", ctype)
	hd.Set("Content-Security-Policy", consoleCSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	// Revalidated on every load, so a deployment's new console is used at once.
	hd.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return nil
}

// agentsResponse is the answer of GET /v1/agents.
type agentsResponse struct {
	Agents    []listedAgent `json:"agents"`
	NextToken string        `json:"nextToken,omitempty"`
}

type listedAgent struct {
	AgentID string          `json:"agentId"`
	Card    json.RawMessage `json:"card"`
}

func (h *Handler) listAgents(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	p := PrincipalOf(r.Context())
	page, err := h.Watcher.Agents(r.Context(), limit, r.URL.Query().Get("nextToken"), p.ActsFor)
	if err != nil {
		return err
	}
	out := agentsResponse{Agents: []listedAgent{}, NextToken: page.NextToken}
	for _, c := range page.Cards {
		out.Agents = append(out.Agents, listedAgent{AgentID: c.AgentID, Card: c.Raw})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *Handler) listAnticipations(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	page, err := h.Eval.AnticipationsOf(r.Context(), r.PathValue("agentId"), limit, r.URL.Query().Get("nextToken"), actsFor(r))
	if err != nil {
		return err
	}
	out := map[string]any{}
	list := []anticipationResponse{}
	for _, rec := range page.Anticipations {
		list = append(list, anticipationResponse{Anticipation: rec.Anticipation, Sealed: rec.Sealed, SealedAt: rec.SealedAt, Digest: rec.Digest, Emitter: rec.Emitter, DeclaredBy: rec.DeclaredBy})
	}
	out["anticipations"] = list
	if page.NextToken != "" {
		out["nextToken"] = page.NextToken
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
