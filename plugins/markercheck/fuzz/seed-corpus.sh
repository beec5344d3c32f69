#!/usr/bin/env bash
# Build the seed corpora for the cargo-fuzz targets from the repo's manifests with markers,
# the markercheck test fixtures (tests/fuzz-regressions) and, when present, Flux's own setter
# fixtures (../shared/oracle/image-automation-controller-setters).
#   corpus/scan/      every file as is
#   corpus/simulate/  the same files, each prefixed with a latestRef line
# Usage: plugins/markercheck/fuzz/seed-corpus.sh   (idempotent; existing corpus entries kept)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
mkdir -p "$here/corpus/scan" "$here/corpus/simulate"
refs=("ghcr.io/org/app:1.2.3" "ghcr.io/org/app:1.10@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" "localhost:5000/a:yes")
n=0
add() {
  local f="$1" h
  h="$(sha1sum "$f" | cut -c1-16)"
  cp "$f" "$here/corpus/scan/$h"
  local i=$(( n % ${#refs[@]} ))
  { printf '%s\n' "${refs[$i]}"; cat "$f"; } > "$here/corpus/simulate/$h"
  n=$((n + 1))
}
while IFS= read -r -d '' f; do
  grep -qi 'imagepolicy' "$f" && add "$f"
done < <(find "$here/seeds" "$repo/clusters" "$repo/plugins/markercheck/tests" "$repo/../shared/oracle/image-automation-controller-setters" \
  -type f \( -name '*.yaml' -o -name '*.yml' -o -name 'Kustomization' -o -path '*/fuzz-regressions/*' \) -print0 2>/dev/null)
echo "seeded $n files into $here/corpus/{scan,simulate}"
