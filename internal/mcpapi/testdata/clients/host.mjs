// Connects to clockwork the way an MCP host does from its configuration
// file (docs/mcp-hosts/), with the official MCP TypeScript SDK's client:
// Claude Code (.mcp.json), VS Code (.vscode/mcp.json) and Cursor
// (.cursor/mcp.json) speak Streamable HTTP with the configured headers;
// Claude Desktop (claude_desktop_config.json) runs the configured command,
// the mcp-remote stdio bridge, and speaks stdio to it.
//
// Usage: node host.mjs NODE_MODULES HOST CONFIG URL TOKEN
// The configuration's server URL is replaced by URL (the test server), and
// its token placeholder (${CLOCKWORK_TOKEN}, ${env:CLOCKWORK_TOKEN},
// ${input:clockwork-token}, or the AUTH_HEADER variable of mcp-remote) by
// TOKEN, as the host would fill it in. Prints {"tools": [names], "listed":
// <list_expectations' structured result>}.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, host, configPath, url, token] = process.argv.slice(2);
const sdk = (p) => import(pathToFileURL(join(modules, "@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");

const config = JSON.parse(readFileSync(configPath, "utf8"));
const servers = config.mcpServers || config.servers;
const server = servers && servers.clockwork;
if (!server) throw new Error(`${configPath}: no server "clockwork"`);

const fill = (v) =>
  v.replaceAll("${CLOCKWORK_TOKEN}", token).replaceAll("${env:CLOCKWORK_TOKEN}", token).replaceAll("${input:clockwork-token}", token);

let transport;
if (host === "claude-desktop") {
  const { StdioClientTransport } = await sdk("client/stdio.js");
  // npx -y mcp-remote@<version> ARGS... : the pinned package, installed.
  if (server.command !== "npx" || !/^mcp-remote@/.test(server.args[1])) throw new Error("expected npx -y mcp-remote@<version> ...");
  const args = server.args.slice(2).map((a) => (a.startsWith("http") ? url : a));
  const env = { ...process.env, ...server.env, AUTH_HEADER: "Bearer " + token };
  transport = new StdioClientTransport({ command: process.execPath, args: [join(modules, "mcp-remote/dist/proxy.js"), ...args], env, stderr: "pipe" });
} else {
  const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
  if (host === "claude-code" && server.type !== "http") throw new Error("Claude Code needs type http");
  if (host === "vscode" && server.type !== "http") throw new Error("VS Code needs type http");
  const headers = Object.fromEntries(Object.entries(server.headers || {}).map(([k, v]) => [k, fill(v)]));
  transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
}
const client = new Client({ name: "clockwork-host-" + host, version: "0.0.0" });
await client.connect(transport);
const listed = await client.listTools();
const res = await client.callTool({ name: "list_expectations", arguments: { agentId: "agent-1" } });
if (res.isError) throw new Error("list_expectations: " + JSON.stringify(res.content));
await client.close();
process.stdout.write(JSON.stringify({ tools: listed.tools.map((t) => t.name), listed: res.structuredContent }));
