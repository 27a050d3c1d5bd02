#!/usr/bin/env bash
# rfc8785 (pinned in requirements.txt) in a cached virtualenv, for the test
# that signs an ANTICIPATE with sign.py and sends it to the server.
#
# Usage:
#   venv.sh python
#       Install once (pip from PyPI; later runs do nothing) and print the
#       virtualenv's python. Safe to run concurrently.
#
# Environment:
#   CLOCKWORK_EMITTER_PYTHON_CACHE  cache directory (default $HOME/.cache/clockwork/emitter-python)
#   CLOCKWORK_PYTHON                Python 3.9+ interpreter (default python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ "${1:-}" = python ] || { echo "emitter-python: usage: venv.sh python" >&2; exit 1; }
CLOCKWORK_PYVENV_CACHE="${CLOCKWORK_EMITTER_PYTHON_CACHE:-${HOME:-/tmp}/.cache/clockwork/emitter-python}" \
  exec bash "$here/../../../scripts/pyvenv.sh" emitter-python "$here/requirements.txt" 3.9 \
  'import rfc8785'
