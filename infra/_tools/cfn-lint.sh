#!/usr/bin/env bash
# cfn-lint, pinned (infra/_tools/cfn-lint-requirements.txt), in a cached
# virtualenv built once from PyPI, as localstack/dynamodb-emulator.sh builds
# moto's.
#
# Usage:
#   infra/_tools/cfn-lint.sh install     build the virtualenv once
#   infra/_tools/cfn-lint.sh run ARGS    install if needed, then cfn-lint ARGS
#
# Environment:
#   CLOCKWORK_CFNLINT_CACHE  cache directory (default $HOME/.cache/clockwork/cfn-lint)
#   CLOCKWORK_PYTHON         Python 3.9+ interpreter (default python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
requirements="$here/cfn-lint-requirements.txt"
cache="${CLOCKWORK_CFNLINT_CACHE:-${HOME:-/tmp}/.cache/clockwork/cfn-lint}"
python="${CLOCKWORK_PYTHON:-python3}"

die() { echo "cfn-lint.sh: $*" >&2; exit 1; }

venv_dir() {
  command -v "$python" >/dev/null 2>&1 || die "$python not found (need Python 3.9+ with venv)"
  local pyver key
  pyver="$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3]); assert sys.version_info >= (3, 9)' 2>/dev/null)" \
    || die "$python is not Python 3.9 or newer"
  key="$( { cat "$requirements"; echo "$pyver"; command -v "$python"; } | sha256sum | cut -c1-12)"
  echo "$cache/venv-$pyver-$key"
}

install() {
  local venv
  venv="$(venv_dir)"
  [ -f "$venv/.complete" ] && return 0
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock -w 900 9 || die "timed out waiting for another install ($cache/.lock)"
  if [ ! -f "$venv/.complete" ]; then
    echo "cfn-lint.sh: installing $(cat "$requirements") into $venv (once)" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2 || die "cannot create a virtualenv with $python"
    "$venv/bin/pip" install --disable-pip-version-check --no-input -q -r "$requirements" >&2 || die "pip install failed"
    touch "$venv/.complete"
  fi
}

case "${1:-}" in
  install) install ;;
  run) shift; install; exec "$(venv_dir)/bin/cfn-lint" "$@" ;;
  *) echo "usage: $0 install | run ARGS..." >&2; exit 2 ;;
esac
