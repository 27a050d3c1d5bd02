#!/usr/bin/env bash
# cfn-lint, pinned (infra/_tools/cfn-lint-requirements.txt), in a cached
# virtualenv built once from PyPI by scripts/pyvenv.sh.
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

# Install once (scripts/pyvenv.sh) and print the virtualenv's python.
venv_python() {
  CLOCKWORK_PYVENV_CACHE="${CLOCKWORK_CFNLINT_CACHE:-${HOME:-/tmp}/.cache/clockwork/cfn-lint}" \
    bash "$here/../../scripts/pyvenv.sh" cfn-lint "$here/cfn-lint-requirements.txt" 3.9 'import cfnlint'
}

case "${1:-}" in
  install) venv_python >/dev/null ;;
  run) shift; python="$(venv_python)"; exec "$(dirname "$python")/cfn-lint" "$@" ;;
  *) echo "usage: $0 install | run ARGS..." >&2; exit 2 ;;
esac
