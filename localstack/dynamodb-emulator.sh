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
#       Install if needed, then print the virtualenv's directory.
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
launcher="$here/dynamodb_emulator.py"

die() { echo "dynamodb-emulator: $*" >&2; exit 1; }

# Install once (scripts/pyvenv.sh: keyed by the pinned requirements and the
# interpreter, so a change of either builds a fresh virtualenv beside the
# old; one process builds, the others wait) and print its python.
venv_python() {
  CLOCKWORK_PYVENV_CACHE="${CLOCKWORK_DYNAMODB_CACHE:-${HOME:-/tmp}/.cache/clockwork/dynamodb-emulator}" \
    bash "$here/../scripts/pyvenv.sh" dynamodb-emulator "$here/dynamodb-emulator-requirements.txt" 3.10 \
    'import moto.server, moto.dynamodb, moto.dynamodbstreams'
}

cmd="${1:-run}"
[ $# -gt 0 ] && shift
case "$cmd" in
  install)
    venv_python >/dev/null
    ;;
  path)
    python="$(venv_python)"
    dirname "$(dirname "$python")"
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
    python="$(venv_python)"
    exec "$python" "$launcher" --host 127.0.0.1 --port "$port" ${extra[@]+"${extra[@]}"}
    ;;
  -h|--help|help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    ;;
  *)
    die "unknown command $cmd (install, run, path)"
    ;;
esac
