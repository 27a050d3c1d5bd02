#!/usr/bin/env bash
# The official MCP TypeScript SDK (npm "@modelcontextprotocol/sdk", pinned in
# package.json) in a cache, with the Node.js 22 the project pins
# (infra/_tools/node22.sh), for the test that loads and calls clockwork's
# tools with its client, the one Claude Code, Claude Desktop, VS Code and
# Cursor build on.
#
# Usage:
#   npm.sh paths
#       Install once (npm from the registry; later runs do nothing) and print
#       two lines: the node binary, and the node_modules directory holding
#       the SDK. Safe to run concurrently.
#
# Environment:
#   CLOCKWORK_MCP_NODE_CACHE  cache directory (default $HOME/.cache/clockwork/mcp-node)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ "${1:-}" = paths ] || { echo "mcp-node: usage: npm.sh paths" >&2; exit 1; }
node="$(bash "$here/../../../../infra/_tools/node22.sh" path)"
# The node22 cache holds the binary alone; the machine's npm installs the
# SDK (plain JavaScript), which then runs on node 22.
command -v npm >/dev/null 2>&1 || { echo "mcp-node: npm not found (install Node.js with npm)" >&2; exit 1; }
cache="${CLOCKWORK_MCP_NODE_CACHE:-${HOME:-/tmp}/.cache/clockwork/mcp-node}"
key="$(cat "$here/package.json" | sha256sum | cut -c1-12)"
dir="$cache/sdk-$key"
if [ ! -f "$dir/.complete" ]; then
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock -w 600 9 || { echo "mcp-node: timed out waiting for another install" >&2; exit 1; }
  if [ ! -f "$dir/.complete" ]; then
    echo "mcp-node: installing the packages pinned in $here/package.json into $dir (once)" >&2
    rm -rf "$dir" && mkdir -p "$dir"
    cp "$here/package.json" "$dir/"
    (cd "$dir" && npm install --no-audit --no-fund --silent >&2) \
      || { echo "mcp-node: npm install failed" >&2; exit 1; }
    touch "$dir/.complete"
  fi
fi
echo "$node"
echo "$dir/node_modules"
