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
requirements="$here/requirements.txt"
cache="${CLOCKWORK_A2A_PYTHON_CACHE:-${HOME:-/tmp}/.cache/clockwork/a2a-python}"
python="${CLOCKWORK_PYTHON:-python3}"

die() { echo "a2a-python: $*" >&2; exit 1; }

command -v "$python" >/dev/null 2>&1 || die "$python not found (need Python 3.10+ with venv)"
pyver="$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3]); assert sys.version_info >= (3, 10)' 2>/dev/null)" \
  || die "$python is not Python 3.10 or newer"
key="$( { cat "$requirements"; echo "$pyver"; command -v "$python"; } | sha256sum | cut -c1-12)"
venv="$cache/venv-$pyver-$key"

[ "${1:-}" = python ] || die "usage: venv.sh python"
if [ ! -f "$venv/.complete" ]; then
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock -w 600 9 || die "timed out waiting for another install ($cache/.lock)"
  if [ ! -f "$venv/.complete" ]; then
    echo "a2a-python: installing a2a-sdk into $venv (once)" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2 || die "cannot create a virtualenv with $python"
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
      "$venv/bin/python" -m pip install --quiet --prefer-binary -r "$requirements" >&2 \
      || { rm -rf "$venv"; die "pip install failed"; }
    "$venv/bin/python" -c 'from a2a.server.tasks import BasePushNotificationSender' >&2 \
      || { rm -rf "$venv"; die "a2a-sdk does not import"; }
    touch "$venv/.complete"
  fi
  exec 9>&-
fi
echo "$venv/bin/python"
