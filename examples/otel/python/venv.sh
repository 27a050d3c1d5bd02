#!/usr/bin/env bash
# The OpenTelemetry Python SDK (pinned in requirements.txt) in a cached
# virtualenv, for the test that runs agent.py against the server.
#
# Usage:
#   venv.sh python
#       Install once (pip from PyPI; later runs do nothing) and print the
#       virtualenv's python. Safe to run concurrently.
#
# Environment:
#   CLOCKWORK_OTEL_PYTHON_CACHE  cache directory (default $HOME/.cache/clockwork/otel-python)
#   CLOCKWORK_PYTHON             Python 3.9+ interpreter (default python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ "${1:-}" = python ] || { echo "otel-python: usage: venv.sh python" >&2; exit 1; }
CLOCKWORK_PYVENV_CACHE="${CLOCKWORK_OTEL_PYTHON_CACHE:-${HOME:-/tmp}/.cache/clockwork/otel-python}" \
  exec bash "$here/../../../scripts/pyvenv.sh" otel-python "$here/requirements.txt" 3.9 \
  'import opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.http.trace_exporter'
