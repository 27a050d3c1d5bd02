#!/usr/bin/env bash
# Runs every Go fuzz target of the parsers and validators for a few seconds
# each (FUZZTIME, default 4s), as go test -run '^$' -fuzz '^FuzzX$' would,
# from one instrumented test binary per package. Targets are
# found by name in the packages below, so a new func FuzzX is run without
# editing this script. The seed corpora (testdata/fuzz/<FuzzName>/) also run
# as ordinary tests in `go test ./...`.
#
# A failure leaves the crashing input in the package's
# testdata/fuzz/<FuzzName>/ (go test prints the path); the script prints
# every failing target and exits non-zero. Total time about 2 minutes on
# 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${FUZZTIME:-4s}"
PACKAGES=(./internal/expect ./internal/assertion ./internal/anticipate ./internal/httpapi ./internal/judge ./internal/evidence ./internal/credentials)

MODULE="$(go list -m)"
CACHE="$(go env GOCACHE)/fuzz"
BIN="$(mktemp -d)"
trap 'rm -rf "$BIN"' EXIT

failed=()
total=0
start=$(date +%s)
for pkg in "${PACKAGES[@]}"; do
  targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$pkg"/*_test.go | sed 's/^func //' | sort -u)
  [ -n "$targets" ] || continue
  # One instrumented test binary per package (what go test -fuzz builds),
  # run once per target from the package directory, where testdata/ is.
  name="$(basename "$pkg")"
  go test -c -fuzz=. -o "$BIN/$name.test" "$pkg"
  for target in $targets; do
    total=$((total + 1))
    log="$BIN/$target.log"
    if (cd "$pkg" && "$BIN/$name.test" -test.run '^$' -test.fuzz "^${target}\$" -test.fuzztime "$FUZZTIME" \
        -test.fuzzcachedir "$CACHE/$MODULE/${pkg#./}") >"$log" 2>&1; then
      # "fuzz: elapsed: 4s, execs: 12345 (3086/sec), new interesting: 2 (total: 14)"
      summary=$(grep -o 'execs: [0-9]*' "$log" | tail -1 || true)
      printf '%-24s %-24s ok   %s\n' "$pkg" "$target" "${summary:-}"
    else
      printf '%-24s %-24s FAIL\n' "$pkg" "$target"
      sed 's/^/    /' "$log" | head -60
      failed+=("$pkg $target")
    fi
  done
done
echo "fuzz: ${total} targets, ${#failed[@]} failed, $(( $(date +%s) - start ))s"
if [ "${#failed[@]}" -gt 0 ]; then
  printf 'failed: %s\n' "${failed[@]}"
  exit 1
fi
