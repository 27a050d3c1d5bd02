#!/usr/bin/env bash
# Node.js 22 for the CDK app (the construct library's supported releases are
# 22 and 24; 20 is end of life), for machines whose own node is older.
#
# Usage:
#   infra/_tools/node22.sh path
#       Print the path of a node binary of major version >= 22: the one on
#       PATH when it is recent enough, else the pinned Node.js 22 release
#       below, installed once from the npm registry (the official binaries,
#       published as node-linux-<arch>) into a cached directory.
#
# The tests (infra/helpers_test.go) and .ci/run use it; set JSII_NODE to the
# printed path to make the CDK's jsii runtime use it.
#
# Environment:
#   CLOCKWORK_NODE_CACHE  cache directory (default $HOME/.cache/clockwork/node)
set -euo pipefail

version=22.23.5
min_major=22
cache="${CLOCKWORK_NODE_CACHE:-${HOME:-/tmp}/.cache/clockwork/node}"

die() { echo "node22: $*" >&2; exit 1; }

major() { "$1" --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/'; }

path() {
  local sys
  if sys="$(command -v node 2>/dev/null)" && [ "$(major "$sys")" -ge "$min_major" ] 2>/dev/null; then
    echo "$sys"; return 0
  fi
  local arch
  case "$(uname -m)" in
    x86_64|amd64) arch=x64 ;;
    aarch64|arm64) arch=arm64 ;;
    *) die "no pinned Node.js build for $(uname -m): install Node.js $min_major or newer yourself" ;;
  esac
  [ "$(uname -s)" = Linux ] || die "the pinned Node.js is for Linux: install Node.js $min_major or newer (https://nodejs.org)"
  local dir="$cache/$version-$arch" bin
  bin="$dir/node_modules/node-linux-$arch/bin/node"
  if [ ! -x "$bin" ] || [ ! -f "$dir/.complete" ]; then
    command -v npm >/dev/null 2>&1 || die "npm not found: install Node.js $min_major or newer (https://nodejs.org)"
    mkdir -p "$cache"
    exec 9>"$cache/.lock"
    flock -w 600 9 || die "timed out waiting for another install ($cache/.lock)"
    if [ ! -f "$dir/.complete" ]; then
      echo "node22: installing Node.js $version ($arch) from the npm registry into $dir (once)" >&2
      rm -rf "$dir"; mkdir -p "$dir"
      npm install --prefix "$dir" --no-save --no-audit --no-fund --ignore-scripts "node-linux-$arch@$version" >&2 \
        || die "npm could not install node-linux-$arch@$version: install Node.js $min_major or newer yourself"
      [ "$(major "$bin")" = "$min_major" ] || die "the installed $bin is not Node.js $min_major"
      touch "$dir/.complete"
    fi
  fi
  echo "$bin"
}

case "${1:-}" in
  path) path ;;
  *) echo "usage: $0 path" >&2; exit 2 ;;
esac
