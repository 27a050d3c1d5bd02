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
#   CLOCKWORK_PYTHON            Python 3.11+ interpreter (default python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
requirements="$here/requirements.txt"
cache="${CLOCKWORK_OPENAPI_PYTHON_CACHE:-${HOME:-/tmp}/.cache/clockwork/openapi-python}"
python="${CLOCKWORK_PYTHON:-python3}"

die() { echo "openapi-python: $*" >&2; exit 1; }

command -v "$python" >/dev/null 2>&1 || die "$python not found (need Python 3.11+ with venv)"
pyver="$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3]); assert sys.version_info >= (3, 11)' 2>/dev/null)" \
  || die "$python is not Python 3.11 or newer (the generated code uses typing.Self)"
key="$( { cat "$requirements"; echo "$pyver"; command -v "$python"; } | sha256sum | cut -c1-12)"
venv="$cache/venv-$pyver-$key"

[ "${1:-}" = python ] || die "usage: venv.sh python"
if [ ! -f "$venv/.complete" ]; then
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock -w 600 9 || die "timed out waiting for another install ($cache/.lock)"
  if [ ! -f "$venv/.complete" ]; then
    echo "openapi-python: installing openapi-python-client into $venv (once)" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2 || die "cannot create a virtualenv with $python"
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
      "$venv/bin/python" -m pip install --quiet --prefer-binary -r "$requirements" >&2 \
      || { rm -rf "$venv"; die "pip install failed"; }
    "$venv/bin/python" -c 'import openapi_python_client, httpx, attrs' >&2 \
      || { rm -rf "$venv"; die "openapi-python-client does not import"; }
    touch "$venv/.complete"
  fi
  exec 9>&-
fi
echo "$venv/bin/python"
