// Loads and calls clockwork's MCP tools with the official MCP TypeScript
// SDK's client (npm "@modelcontextprotocol/sdk", pinned in package.json),
// the client Claude Code, Claude Desktop, VS Code and Cursor build on, the
// way those hosts connect to a remote server: Streamable HTTP with the
// bearer token in a header.
//
// Usage: node client.mjs NODE_MODULES < plan.json
// The plan is {"url", "token", "calls": [{"tool", "arguments"}]}; the report
// on stdout is {"protocolVersion", "tools": [name...], "results": [{"tool",
// "isError", "structured", "text", "error"}]}. An SDK exception on connect
// or on listing the tools (a tool list the SDK refuses) fails the script;
// one on a call is reported in that call's "error" (the SDK validates
// structured content against the tool's output schema with a JSON Schema
// validator, and throws when it does not conform).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const modules = process.argv[2];
const sdk = (p) => import(pathToFileURL(join(modules, "@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const plan = JSON.parse(readFileSync(0, "utf8"));
const transport = new StreamableHTTPClientTransport(new URL(plan.url), {
  requestInit: { headers: { Authorization: "Bearer " + plan.token } },
});
const client = new Client({ name: "clockwork-test-ts", version: "0.0.0" });
await client.connect(transport);
const listed = await client.listTools();
const report = { protocolVersion: transport.protocolVersion ?? null, tools: listed.tools.map((t) => t.name), results: [] };
for (const call of plan.calls) {
  const out = { tool: call.tool };
  try {
    const res = await client.callTool({ name: call.tool, arguments: call.arguments });
    out.isError = !!res.isError;
    out.structured = res.structuredContent ?? null;
    out.text = (res.content || []).map((c) => c.text || "").join("");
  } catch (e) {
    out.error = String(e && e.message ? e.message : e);
  }
  report.results.push(out);
}
await client.close();
process.stdout.write(JSON.stringify(report));
