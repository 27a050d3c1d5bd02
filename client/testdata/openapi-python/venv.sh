#!/usr/bin/env bash
# openapi-python-client (PyPI) in a cached virtualenv, for the test that
# generates a Python client from /openapi.json and calls the server with it.
#
# Usage:
#   venv.sh python
#       Install once (pip from PyPI, about 10 s; later runs do nothing) and
#       print the virtualenv's python. Safe to run concurrently.
#
# Environment:
#   CLOCKWORK_OPENAPI_PYTHON_CACHE  cache directory
#                               (default $HOME/.cache/clockwork/openapi-python)
#   CLOCKWORK_PYTHON            Python 3.11+ interpreter (the generated code
#                               uses typing.Self; default python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ "${1:-}" = python ] || { echo "openapi-python: usage: venv.sh python" >&2; exit 1; }
CLOCKWORK_PYVENV_CACHE="${CLOCKWORK_OPENAPI_PYTHON_CACHE:-${HOME:-/tmp}/.cache/clockwork/openapi-python}" \
  exec bash "$here/../../../scripts/pyvenv.sh" openapi-python "$here/requirements.txt" 3.11 \
  'import openapi_python_client, httpx, attrs'
