#!/usr/bin/env bash
# DynamoDB (with Streams and transactions) emulator for the tests, without
# Docker: moto's server (Apache-2.0, from PyPI) in a cached virtualenv.
#
# (Amazon's DynamoDB Local is not used: it is under the vendor's own terms,
# not an open-source licence.)
#
# Usage:
#   localstack/dynamodb-emulator.sh install
#       Build the virtualenv once (pip from PyPI, about 30 s), then do nothing
#       on later runs. Safe to run concurrently: one builds, the others wait.
#   localstack/dynamodb-emulator.sh run [--port N] [--exit-on-stdin-eof]
#       Install if needed, then serve DynamoDB and DynamoDB Streams on
#       127.0.0.1:N (N=0, the default, picks a free port) in memory, printing
#       "READY http://127.0.0.1:PORT" once it listens. Runs in the
#       foreground until SIGTERM/SIGINT (or end of stdin with
#       --exit-on-stdin-eof).
#   localstack/dynamodb-emulator.sh path
#       Print the virtualenv directory that install builds.
#
# Clients: any region (use us-east-1), any static credentials (use
# "local"/"local"), endpoint http://127.0.0.1:PORT for both services.
#
# Environment:
#   CLOCKWORK_DYNAMODB_CACHE  cache directory
#                             (default $HOME/.cache/clockwork/dynamodb-emulator)
#   CLOCKWORK_PYTHON          Python 3.10+ interpreter (default python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
requirements="$here/dynamodb-emulator-requirements.txt"
launcher="$here/dynamodb_emulator.py"
cache="${CLOCKWORK_DYNAMODB_CACHE:-${HOME:-/tmp}/.cache/clockwork/dynamodb-emulator}"
python="${CLOCKWORK_PYTHON:-python3}"

die() { echo "dynamodb-emulator: $*" >&2; exit 1; }

venv_dir() {
  command -v "$python" >/dev/null 2>&1 || die "$python not found (need Python 3.10+ with venv)"
  local pyver key
  pyver="$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3]); assert sys.version_info >= (3, 10)' 2>/dev/null)" \
    || die "$python is not Python 3.10 or newer"
  # The virtualenv is keyed by the pinned requirements and the interpreter,
  # so a change of either builds a fresh one beside the old.
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
    echo "dynamodb-emulator: installing moto into $venv (once)" >&2
    local start=$SECONDS
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2 || die "cannot create a virtualenv with $python"
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
      "$venv/bin/python" -m pip install --quiet --prefer-binary -r "$requirements" >&2 \
      || { rm -rf "$venv"; die "pip install failed"; }
    "$venv/bin/python" -c 'import moto.server, moto.dynamodb, moto.dynamodbstreams' >&2 \
      || { rm -rf "$venv"; die "moto does not import"; }
    touch "$venv/.complete"
    echo "dynamodb-emulator: installed in $((SECONDS - start)) s" >&2
  fi
  exec 9>&-
}

cmd="${1:-run}"
[ $# -gt 0 ] && shift
case "$cmd" in
  install)
    install
    ;;
  path)
    venv_dir
    ;;
  run)
    port=0
    extra=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --port) port="${2:?--port needs a value}"; shift 2 ;;
        --port=*) port="${1#--port=}"; shift ;;
        --exit-on-stdin-eof) extra+=("$1"); shift ;;
        *) die "unknown option $1" ;;
      esac
    done
    install
    venv="$(venv_dir)"
    exec "$venv/bin/python" "$launcher" --host 127.0.0.1 --port "$port" ${extra[@]+"${extra[@]}"}
    ;;
  -h|--help|help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    ;;
  *)
    die "unknown command $cmd (install, run, path)"
    ;;
esac
