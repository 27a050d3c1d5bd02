#!/usr/bin/env bash
# The official MCP Python SDK (PyPI "mcp", pinned in requirements.txt) in a
# cached virtualenv, for the test that loads and calls clockwork's tools
# with its client.
#
# Usage:
#   venv.sh python
#       Install once (pip from PyPI; later runs do nothing) and print the
#       virtualenv's python. Safe to run concurrently.
#
# Environment:
#   CLOCKWORK_MCP_PYTHON_CACHE  cache directory (default $HOME/.cache/clockwork/mcp-python)
#   CLOCKWORK_PYTHON            Python 3.10+ interpreter (default python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ "${1:-}" = python ] || { echo "mcp-python: usage: venv.sh python" >&2; exit 1; }
CLOCKWORK_PYVENV_CACHE="${CLOCKWORK_MCP_PYTHON_CACHE:-${HOME:-/tmp}/.cache/clockwork/mcp-python}" \
  exec bash "$here/../../../../scripts/pyvenv.sh" mcp-python "$here/requirements.txt" 3.10 \
  'import mcp, mcp.client.session'
