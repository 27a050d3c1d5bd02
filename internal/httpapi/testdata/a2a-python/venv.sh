#!/usr/bin/env bash
# The official A2A Python SDK (0.3 line) in a cached virtualenv, for the
# tests that push to /a2a exactly as its push sender does.
#
# Usage:
#   venv.sh python
#       Install once (pip from PyPI, about 10 s; later runs do nothing) and
#       print the virtualenv's python. Safe to run concurrently.
#
# Environment:
#   CLOCKWORK_A2A_PYTHON_CACHE  cache directory
#                               (default $HOME/.cache/clockwork/a2a-python)
#   CLOCKWORK_PYTHON            Python 3.10+ interpreter (default python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ "${1:-}" = python ] || { echo "a2a-python: usage: venv.sh python" >&2; exit 1; }
CLOCKWORK_PYVENV_CACHE="${CLOCKWORK_A2A_PYTHON_CACHE:-${HOME:-/tmp}/.cache/clockwork/a2a-python}" \
  exec bash "$here/../../../../scripts/pyvenv.sh" a2a-python "$here/requirements.txt" 3.10 \
  'from a2a.server.tasks import BasePushNotificationSender; from a2a.server.apps import A2AStarletteApplication; import uvicorn'
