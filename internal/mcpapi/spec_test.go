package mcpapi_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolSchemasAreObjectSchemas: the MCP specification's Tool type
// requires inputSchema and outputSchema to be JSON Schema objects with
// "type": "object"; the official TypeScript and Python SDKs refuse a whole
// tool list otherwise (a boolean schema, or "type": ["null", "object"]).
// Checked on the wire for every tool, so a new tool cannot regress it (the
// official clients themselves load the list in the MCPOfficialClients
// scenario).
func TestToolSchemasAreObjectSchemas(t *testing.T) {
	_, srv := startServer(t)
	cs := connect(t, srv, adminToken)
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		for what, s := range map[string]any{"inputSchema": tl.InputSchema, "outputSchema": tl.OutputSchema} {
			b, _ := json.Marshal(s)
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Errorf("%s %s is not a JSON object: %s", tl.Name, what, b)
				continue
			}
			if m["type"] != "object" {
				t.Errorf(`%s %s has type %v, want "object"`, tl.Name, what, m["type"])
			}
		}
	}
}

// TestUnknownProtocolVersionNegotiated: a client that asks for a protocol
// version the server does not support is answered with one the server
// does (its newest), as the specification's version negotiation says, not
// refused; the client then decides whether to go on.
func TestUnknownProtocolVersionNegotiated(t *testing.T) {
	_, srv := startServer(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2099-01-01","capabilities":{},"clientInfo":{"name":"future","version":"1"}}}`
	st, b := httpDoHeaders(t, srv, "POST", "/mcp", adminToken, body, map[string]string{"Accept": "application/json, text/event-stream"})
	if st != 200 {
		t.Fatalf("%d %s", st, b)
	}
	var res struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &res); err != nil || res.Result.ProtocolVersion == "" || res.Result.ProtocolVersion == "2099-01-01" {
		t.Fatalf("initialize answered %s (%v)", b, err)
	}
	for _, known := range []string{"2025-06-18", "2025-11-25"} {
		body := strings.Replace(body, "2099-01-01", known, 1)
		if _, b := httpDoHeaders(t, srv, "POST", "/mcp", adminToken, body, map[string]string{"Accept": "application/json, text/event-stream"}); !strings.Contains(string(b), `"protocolVersion":"`+known+`"`) {
			t.Errorf("a client asking for %s got %s", known, b)
		}
	}
}

// TestDocsShowTheCheckedHostConfigs: the MCP host configurations the MCP
// page (docs/mcp.md) shows are, verbatim, the files the MCPHostConfigs
// scenario connects with.
func TestDocsShowTheCheckedHostConfigs(t *testing.T) {
	readme, err := os.ReadFile("../../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../../docs/mcp-hosts/*.json")
	if len(files) != 4 {
		t.Fatalf("docs/mcp-hosts holds %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(readme), "```json\n"+string(b)+"```") {
			t.Errorf("docs/mcp.md does not show %s as it is", f)
		}
	}
}
