package httpapi

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/watcher"
)

// openAPIDoc is the part of the document the tests read.
type openAPIDoc struct {
	OpenAPI  string                                `json:"openapi"`
	Security []map[string][]string                 `json:"security"`
	Paths    map[string]map[string]json.RawMessage `json:"paths"`
}

type openAPIOperation struct {
	OperationID string            `json:"operationId"`
	Description string            `json:"description"`
	Security    *[]map[string]any `json:"security"`
	Parameters  []struct {
		Name string `json:"name"`
		In   string `json:"in"`
	} `json:"parameters"`
	RequestBody *struct {
		Content map[string]struct {
			Example json.RawMessage `json:"example"`
		} `json:"content"`
	} `json:"requestBody"`
	Responses map[string]json.RawMessage `json:"responses"`
}

var httpMethods = []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}

func loadDoc(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	return doc
}

// operations returns the document's operations keyed by mux pattern
// ("GET /v1/agents/{agentId}").
func (d openAPIDoc) operations(t *testing.T) map[string]openAPIOperation {
	t.Helper()
	out := map[string]openAPIOperation{}
	for path, item := range d.Paths {
		for key, raw := range item {
			if !slices.Contains(httpMethods, key) {
				if key != "parameters" && key != "summary" && key != "description" {
					t.Errorf("path %s: unexpected member %q", path, key)
				}
				continue
			}
			var op openAPIOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", key, path, err)
			}
			out[strings.ToUpper(key)+" "+path] = op
		}
	}
	return out
}

// testHandler builds the handler with both services (never called).
func testHandler(t *testing.T) *Handler {
	t.Helper()
	a, err := auth.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return New(watcher.New(nil, nil, expect.DefaultConfig()), evaluation.New(nil, evaluation.Options{}), a, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

var wildcard = regexp.MustCompile(`\{[^}/]+\}`)

// TestOpenAPIMatchesRoutes walks the patterns the mux was built with and
// fails when a route is missing from openapi.json or the document has an
// operation the server lacks. Each documented operation must also reach
// its own pattern through the mux (not the catch-all).
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := loadDoc(t)
	ops := doc.operations(t)
	h := testHandler(t)
	served := h.Patterns()
	if len(served) < 20 {
		t.Fatalf("only %d patterns registered: %v", len(served), served)
	}
	for _, p := range served {
		if _, ok := ops[p]; !ok {
			t.Errorf("route %q is served but not in openapi.json", p)
		}
	}
	for p := range ops {
		if !slices.Contains(served, p) {
			t.Errorf("openapi.json documents %q, which the server does not serve", p)
		}
	}
	// Every documented operation reaches its pattern through the mux.
	for p := range ops {
		method, path, _ := strings.Cut(p, " ")
		concrete := wildcard.ReplaceAllString(path, "x1")
		req := httptest.NewRequest(method, concrete, nil)
		if _, got := h.mux.Handler(req); got != p {
			t.Errorf("%s %s reaches pattern %q, want %q", method, concrete, got, p)
		}
	}
}

// TestOpenAPIOperations checks each operation against the routes table:
// security (public routes have none), the scope named in the description,
// path parameters, problem responses and a 2xx answer.
func TestOpenAPIOperations(t *testing.T) {
	doc := loadDoc(t)
	if len(doc.Security) != 1 || doc.Security[0]["bearerAuth"] == nil {
		t.Errorf("global security = %v, want bearerAuth", doc.Security)
	}
	ops := doc.operations(t)
	ids := map[string]string{}
	for _, rt := range testHandler(t).routes() {
		op, ok := ops[rt.Pattern]
		if !ok {
			continue // reported by TestOpenAPIMatchesRoutes
		}
		if op.OperationID == "" {
			t.Errorf("%s: no operationId", rt.Pattern)
		} else if prev, dup := ids[op.OperationID]; dup {
			t.Errorf("%s: operationId %q already used by %s", rt.Pattern, op.OperationID, prev)
		}
		ids[op.OperationID] = rt.Pattern
		public := op.Security != nil && len(*op.Security) == 0
		if rt.Push != (rt.Pattern == auth.PushRoute) {
			t.Errorf("%s: Push is %v; auth.PushRoute (the route the authorizers take the notification token on) is %s", rt.Pattern, rt.Push, auth.PushRoute)
		}
		if rt.Push {
			found := false
			if op.Security != nil {
				for _, req := range *op.Security {
					if _, ok := req["a2aNotificationToken"]; ok {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("%s: takes X-A2A-Notification-Token but does not document the a2aNotificationToken scheme", rt.Pattern)
			}
		}
		if public != rt.Public {
			t.Errorf("%s: documented public=%v, served public=%v", rt.Pattern, public, rt.Public)
		}
		if rt.Scope != "" && !strings.Contains(op.Description, "Scope: `"+string(rt.Scope)+"`.") {
			t.Errorf("%s: description does not name the scope %s: %q", rt.Pattern, rt.Scope, op.Description)
		}
		var pathParams []string
		for _, p := range op.Parameters {
			if p.In == "path" {
				pathParams = append(pathParams, "{"+p.Name+"}")
			}
		}
		want := wildcard.FindAllString(rt.Pattern, -1)
		sort.Strings(pathParams)
		sort.Strings(want)
		if !slices.Equal(pathParams, want) {
			t.Errorf("%s: path parameters %v, want %v", rt.Pattern, pathParams, want)
		}
		ok2xx := false
		for code := range op.Responses {
			n, err := strconv.Atoi(code)
			if err != nil {
				t.Errorf("%s: response %q is not a status code", rt.Pattern, code)
			}
			if n >= 200 && n < 300 {
				ok2xx = true
			}
			if n >= 500 {
				t.Errorf("%s: documents %d; the server must not answer 5xx", rt.Pattern, n)
			}
		}
		if !ok2xx {
			t.Errorf("%s: no 2xx response", rt.Pattern)
		}
		if !rt.Public {
			for _, code := range []string{"401", "403"} {
				if _, ok := op.Responses[code]; !ok {
					t.Errorf("%s: %s not documented", rt.Pattern, code)
				}
			}
		}
		if op.RequestBody != nil {
			for _, code := range []string{"400", "413"} {
				if _, ok := op.Responses[code]; !ok {
					t.Errorf("%s: takes a body but %s is not documented", rt.Pattern, code)
				}
			}
		}
		if len(want) > 0 {
			if _, ok := op.Responses["404"]; !ok {
				t.Errorf("%s: has path parameters but 404 is not documented", rt.Pattern)
			}
		}
	}
}

// TestOpenAPIRefs checks that every $ref resolves inside the document.
func TestOpenAPIRefs(t *testing.T) {
	var root any
	if err := json.Unmarshal(OpenAPI, &root); err != nil {
		t.Fatal(err)
	}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				if resolvePointer(root, ref) == nil {
					t.Errorf("%s: $ref %q does not resolve", at, ref)
				}
			}
			for k, c := range x {
				walk(c, at+"/"+k)
			}
		case []any:
			for i, c := range x {
				walk(c, at+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(root, "#")
}

func resolvePointer(root any, ref string) any {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	cur := root
	for _, seg := range strings.Split(p, "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = m[seg]; !ok {
			return nil
		}
	}
	return cur
}

// TestOpenAPIExamples checks that the document's request examples are
// accepted by the validators the handlers use, so schemathesis's examples
// phase exercises the success paths.
func TestOpenAPIExamples(t *testing.T) {
	ops := loadDoc(t).operations(t)
	example := func(pattern string) []byte {
		t.Helper()
		op := ops[pattern]
		if op.RequestBody == nil || len(op.RequestBody.Content["application/json"].Example) == 0 {
			t.Fatalf("%s: no request example", pattern)
		}
		return op.RequestBody.Content["application/json"].Example
	}
	if _, err := expect.ParseCard("agent-1", example("PUT /v1/agents/{agentId}")); err != nil {
		t.Errorf("card example: %v", err)
	}
	var raise expect.RaiseRequest
	if err := decodeStrict(example("POST /v1/agents/{agentId}/expectations"), &raise); err != nil || len(raise.Expectations) == 0 {
		t.Errorf("raise example: %v", err)
	}
	var facts factsRequest
	if err := decodeStrict(example("POST /v1/agents/{agentId}/facts"), &facts); err != nil || len(facts.Facts) == 0 {
		t.Errorf("facts example: %v", err)
	}
	var wd withdrawRequest
	if err := decodeStrict(example("POST /v1/agents/{agentId}/withdrawals"), &wd); err != nil || len(wd.Withdraw) == 0 {
		t.Errorf("withdrawals example: %v", err)
	}
	for _, p := range []string{"POST /v1/anticipations", "PUT /v1/anticipations/{id}"} {
		if _, err := anticipate.Validate(example(p)); err != nil {
			t.Errorf("%s example: %v", p, err)
		}
	}
	if _, err := anticipate.ValidateEvent(example("POST /v1/executions/{planId}/events")); err != nil {
		t.Errorf("event example: %v", err)
	}
	var g gradeRequest
	if err := decodeStrict(example("POST /v1/verifications/{verificationId}/grades"), &g); err != nil || g.Score == nil {
		t.Errorf("grade example: %v", err)
	}
	if !json.Valid(example("POST /v1/agents/{agentId}/a2a")) {
		t.Errorf("a2a example is not JSON")
	}
}

// TestOpenAPIServed checks GET /openapi.json answers the embedded document
// without a token.
func TestOpenAPIServed(t *testing.T) {
	h := testHandler(t)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if rec.Body.String() != string(OpenAPI) {
		t.Fatalf("served document differs from the embedded one")
	}
}

// TestRoutesOnlyInTable fails when a source file of this package registers
// a pattern on a mux directly rather than through the routes table in
// handler.go (such a route would escape TestOpenAPIMatchesRoutes).
func TestRoutesOnlyInTable(t *testing.T) {
	table := map[string]bool{"/": true}
	for _, rt := range testHandler(t).routes() {
		table[rt.Pattern] = true
	}
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			p, _ := strconv.Unquote(lit.Value)
			if !table[p] {
				t.Errorf("%s: pattern %q is registered outside the routes table in handler.go", fset.Position(lit.Pos()), p)
			}
			return true
		})
	}
}
