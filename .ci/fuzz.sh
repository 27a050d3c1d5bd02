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
# every failing target and exits non-zero. A run that fails only with Go
# 1.26's end-of-fuzztime coordinator race (a bare "context deadline
# exceeded", no input written: go.dev/issue/75804) is run again, at most
# twice. Total time about 2 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${FUZZTIME:-4s}"
PACKAGES=(./internal/expect ./internal/retention ./internal/jsonwalk ./internal/assertion ./internal/anticipate ./internal/httpapi ./internal/judge ./internal/evidence ./internal/credentials)

MODULE="$(go list -m)"
CACHE="$(go env GOCACHE)/fuzz"
BIN="$(mktemp -d)"
trap 'rm -rf "$BIN"' EXIT

failed=()
total=0
start=$(date +%s)

# deadline_race LOG: whether the run in LOG failed only with Go's fuzzing
# coordinator race at the end of a -fuzztime window (go.dev/issue/75804,
# fixed in Go 1.27; this module is on 1.26): a bare "context deadline
# exceeded" and no failing input written. A real finding always writes its
# input (or names the seed corpus entry that failed), so it never matches.
deadline_race() {
  grep -q 'Failing input written to\|failure while testing seed corpus\|panic:' "$1" && return 1
  awk '/^--- FAIL: /{getline; if ($0 ~ /^    context deadline exceeded$/) found=1; else other=1} END{exit !(found && !other)}' "$1"
}

# fuzz_one PKG NAME TARGET LOG: fuzz one target for FUZZTIME, running it
# again (at most twice) when a run ends only in that coordinator race.
fuzz_one() {
  local pkg=$1 name=$2 target=$3 log=$4 try
  for try in 1 2 3; do
    if (cd "$pkg" && "$BIN/$name.test" -test.run '^$' -test.fuzz "^${target}\$" -test.fuzztime "$FUZZTIME" \
        -test.fuzzcachedir "$CACHE/$MODULE/${pkg#./}") >"$log" 2>&1; then
      return 0
    fi
    deadline_race "$log" || return 1
    echo "    $target: Go's end-of-fuzztime race (go.dev/issue/75804, no input written); running it again" >&2
  done
  return 1
}
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
    if fuzz_one "$pkg" "$name" "$target" "$log"; then
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
