#!/usr/bin/env bash
# Wall time and peak memory of the release binary against `grep -rl '"$imagepolicy"'` on the
# benchmark trees (see benches/scan.rs: fleet-10k, fleet-100k, mapping-16mb, mapping-50mb;
# one ImagePolicy per marked image, latestRef in the tree, every marker simulated).
#
#   cargo bench -p kubectl-markercheck          # builds the trees in $TMPDIR/markercheck-bench/
#   cargo build --release -p kubectl-markercheck
#   plugins/markercheck/benches/compare.sh [RUNS] [TREE...]
#
# Needs hyperfine and GNU time (/usr/bin/time). Prints, per tree, hyperfine's medians, the
# ratio to grep, and the peak RSS of the markercheck run.
set -euo pipefail
runs="${1:-10}"
shift || true
trees=("$@")
[ ${#trees[@]} -gt 0 ] || trees=(fleet-10k fleet-100k mapping-16mb mapping-50mb)
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
bin="${CARGO_TARGET_DIR:-$repo/target}/release/kubectl-markercheck"
base="${TMPDIR:-/tmp}/markercheck-bench"
[ -x "$bin" ] || { echo "build it first: cargo build --release -p kubectl-markercheck" >&2; exit 2; }
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
for t in "${trees[@]}"; do
  tree="$base/$t"
  [ -f "$tree/.complete" ] || { echo "no tree at $tree: run cargo bench -p kubectl-markercheck first" >&2; exit 2; }
  out="$(mktemp)"
  hyperfine -N --warmup 2 --runs "$runs" --export-json "$out" \
    -n grep "grep -rl '\"\$imagepolicy\"' $tree" \
    -n markercheck "$bin $tree --repo-root $tree --simulate -o json" >/dev/null
  rss=$(/usr/bin/time -f %M "$bin" "$tree" --repo-root "$tree" --simulate -o json 2>&1 >/dev/null | tail -1)
  python3 - "$out" "$t" "$rss" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
g, m = r["grep"]["median"], r["markercheck"]["median"]
print(f"| {sys.argv[2]} | {m*1000:.0f} ms | {g*1000:.0f} ms | {m/g:.2f}x | {int(sys.argv[3])//1024} MB |")
PY
  rm -f "$out"
done
