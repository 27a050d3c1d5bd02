#!/usr/bin/env bash
# Property-based API testing with schemathesis against the local server.
#
# Builds the local server and the seeding tool, starts the server on a fresh
# data directory with a tokens file, seeds agent-1 (card, expectations in
# every state, anticipations, an execution and a PENDING VERIFY), then runs
# schemathesis on the served /openapi.json with a fixed seed and the checks
# not_a_server_error, status_code_conformance and response_schema_conformance.
# Prints the number of requests and of 5xx answers; exits non-zero on any
# failure.
#
# The server and schemathesis run in a network namespace of their own
# (unshare -n) with only loopback up, so that nothing generated (an agent
# card naming some host, a lapse task) can reach past this machine.
#
# Environment: ST_MAX_EXAMPLES (default 120 per operation), ST_SEED (default
# 20260624), ST_WORKERS (default 2), ST_PHASES (default
# examples,coverage,fuzzing,stateful), KEEP=1 keeps the work directory.
set -euo pipefail
cd "$(dirname "$0")/.."

ST_VERSION=4.32.5
VENV="${HOME}/.cache/clockwork/schemathesis-venv"
PORT=18080

if [ "${1:-}" != "--inner" ]; then
  # CPython 3.11.7 (python3 here) crashes inside hypothesis with "AST
  # constructor recursion depth mismatch"; prefer a newer interpreter.
  PY="${ST_PYTHON:-}"
  if [ -z "$PY" ]; then
    root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
    for cand in "$root"/versions/3.12.*/bin/python3 "$root"/versions/3.13.*/bin/python3 "$(command -v python3.12 || true)" "$(command -v python3 || true)"; do
      if [ -n "$cand" ] && [ -x "$cand" ] && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
        PY="$cand"; break
      fi
    done
    PY="${PY:-python3}"
  fi
  want="schemathesis==${ST_VERSION} $("$PY" -c 'import sys; print("python%d.%d" % sys.version_info[:2])')"
  if [ "$(cat "$VENV/.clockwork" 2>/dev/null)" != "$want" ] || ! "$VENV/bin/schemathesis" --version >/dev/null 2>&1; then
    echo "== ${want} into ${VENV}"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==${ST_VERSION}"
    echo "$want" >"$VENV/.clockwork"
  fi
  "$VENV/bin/schemathesis" --version
  "$VENV/bin/python" --version

  WORK="$(mktemp -d "${TMPDIR:-/tmp}/clockwork-schemathesis.XXXXXX")"
  if [ "${KEEP:-}" != 1 ]; then trap 'rm -rf "$WORK"' EXIT; fi
  echo "== build (work directory ${WORK})"
  go build -o "$WORK/local" ./functions/local
  go build -o "$WORK/seed" ./internal/tools/schemathesis

  if ! unshare -n true 2>/dev/null; then
    echo "unshare -n is not available: refusing to run generated traffic outside a private network namespace" >&2
    exit 1
  fi
  set +e
  unshare -n bash "$0" --inner "$WORK"
  rc=$?
  set -e
  exit $rc
fi

# --- inside the network namespace -------------------------------------------
WORK="$2"
ip link set lo up
BASE="http://127.0.0.1:${PORT}"
TOKEN="cw_schemathesis_$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
cat >"$WORK/tokens.json" <<EOF
{"tokens":[{"token":"${TOKEN}","principal":"schemathesis","scopes":["agents:write","expectations:write","facts:write","anticipations:write","events:write","grades:write","channels:write","read"],"agents":["*"]}]}
EOF
mkdir -p "$WORK/data"

"$WORK/local" -addr "127.0.0.1:${PORT}" -data "$WORK/data" -tokens "$WORK/tokens.json" -log-level warn \
  >"$WORK/server.out" 2>"$WORK/server.log" &
SERVER=$!
stop_server() {
  if kill -0 "$SERVER" 2>/dev/null; then
    kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
  fi
}
trap stop_server EXIT

echo "== seed"
"$WORK/seed" -url "$BASE" -token "$TOKEN" >"$WORK/schemathesis.toml"
cat "$WORK/schemathesis.toml"

echo "== schemathesis"
set +e
"$VENV/bin/schemathesis" --config-file "$WORK/schemathesis.toml" run "$BASE/openapi.json" \
  --url "$BASE" \
  -H "Authorization: Bearer ${TOKEN}" \
  --checks not_a_server_error,status_code_conformance,response_schema_conformance \
  --phases "${ST_PHASES:-examples,coverage,fuzzing,stateful}" \
  --seed "${ST_SEED:-20260624}" \
  --max-examples "${ST_MAX_EXAMPLES:-120}" \
  --workers "${ST_WORKERS:-2}" \
  --request-timeout 10 \
  --suppress-health-check all \
  --no-color \
  --report har --report-har-path "$WORK/requests.har"
st=$?
set -e

stop_server
trap - EXIT

# Count what was sent and what came back, from the HAR of every request.
"$VENV/bin/python" - "$WORK/requests.har" "$WORK/server.log" <<'EOF'
import json, sys
har = json.load(open(sys.argv[1]))
entries = har["log"]["entries"]
statuses = {}
for e in entries:
    s = e["response"]["status"]
    statuses[s] = statuses.get(s, 0) + 1
five = sum(n for s, n in statuses.items() if s >= 500)
print("requests: %d" % len(entries))
print("statuses: " + ", ".join("%s=%d" % (s, n) for s, n in sorted(statuses.items())))
print("5xx: %d" % five)
for e in entries:
    if e["response"]["status"] >= 500:
        r = e["request"]
        body = (r.get("postData") or {}).get("text", "")
        print("  5xx: %s %s %s" % (r["method"], r["url"], body[:300]))
panics = [l for l in open(sys.argv[2]) if "panic" in l]
if panics:
    print("server panics logged: %d" % len(panics))
    for l in panics[:5]:
        print("  " + l.strip()[:400])
sys.exit(1 if five or panics else 0)
EOF
counts=$?
if [ "$st" -ne 0 ] || [ "$counts" -ne 0 ]; then
  echo "schemathesis: FAILED (schemathesis exit ${st})"
  exit 1
fi
echo "schemathesis: passed"
