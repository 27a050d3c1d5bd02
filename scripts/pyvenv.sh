#!/usr/bin/env bash
# A pinned Python tool in a cached virtualenv, for the tests that run one
# (the A2A Python SDK, openapi-python-client): installed once from PyPI,
# keyed by the requirements and the interpreter so a change of either builds
# a fresh one beside the old; safe to run concurrently.
#
# Usage:
#   pyvenv.sh NAME REQUIREMENTS MIN_VERSION IMPORT_CHECK
#       Install once and print the virtualenv's python. NAME prefixes the
#       messages and names the cache directory; MIN_VERSION is "3.N";
#       IMPORT_CHECK is Python that must run in the new virtualenv.
#
# Environment:
#   CLOCKWORK_PYVENV_CACHE  cache directory (default $HOME/.cache/clockwork/NAME)
#   CLOCKWORK_PYTHON        interpreter (default python3)
set -euo pipefail

[ $# = 4 ] || { echo "usage: pyvenv.sh NAME REQUIREMENTS MIN_VERSION IMPORT_CHECK" >&2; exit 2; }
name="$1" requirements="$2" minver="$3" check="$4"
cache="${CLOCKWORK_PYVENV_CACHE:-${HOME:-/tmp}/.cache/clockwork/$name}"
python="${CLOCKWORK_PYTHON:-python3}"

die() { echo "$name: $*" >&2; exit 1; }

command -v "$python" >/dev/null 2>&1 || die "$python not found (need Python $minver+ with venv)"
pyver="$("$python" -c "import sys; print('%d.%d.%d' % sys.version_info[:3]); assert sys.version_info >= tuple(map(int, '$minver'.split('.')))" 2>/dev/null)" \
  || die "$python is not Python $minver or newer"
key="$( { cat "$requirements"; echo "$pyver"; command -v "$python"; } | sha256sum | cut -c1-12)"
venv="$cache/venv-$pyver-$key"

if [ ! -f "$venv/.complete" ]; then
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock -w 600 9 || die "timed out waiting for another install ($cache/.lock)"
  if [ ! -f "$venv/.complete" ]; then
    echo "$name: installing the packages pinned in $requirements into $venv (once)" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2 || die "cannot create a virtualenv with $python"
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
      "$venv/bin/python" -m pip install --quiet --prefer-binary -r "$requirements" >&2 \
      || { rm -rf "$venv"; die "pip install failed"; }
    "$venv/bin/python" -c "$check" >&2 \
      || { rm -rf "$venv"; die "the installed packages do not import"; }
    touch "$venv/.complete"
  fi
  exec 9>&-
fi
echo "$venv/bin/python"
