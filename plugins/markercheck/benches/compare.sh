#!/usr/bin/env bash
# Wall time and peak memory of the release binary against `grep -rl '"$imagepolicy"'` on the
# benchmark tree (10,000 manifests in 100 kustomization directories, 1,000 markers).
#
#   cargo bench -p kubectl-markercheck          # builds the tree in $TMPDIR/markercheck-bench-tree
#   cargo build --release -p kubectl-markercheck
#   plugins/markercheck/benches/compare.sh [RUNS]
#
# Needs hyperfine and GNU time (/usr/bin/time). Prints hyperfine's table (median in the JSON
# export) and the ratios of the medians, then the peak RSS of each markercheck mode.
set -euo pipefail
runs="${1:-20}"
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
bin="$repo/target/release/kubectl-markercheck"
tree="${TMPDIR:-/tmp}/markercheck-bench-tree"
[ -x "$bin" ] || { echo "build it first: cargo build --release -p kubectl-markercheck" >&2; exit 2; }
[ -f "$tree/.complete" ] || { echo "no tree at $tree: run cargo bench -p kubectl-markercheck first" >&2; exit 2; }
set_flag="flux-system:app=ghcr.io/org/app:1.2.3"
out="$(mktemp)"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
hyperfine -N --warmup 3 --runs "$runs" --export-json "$out" \
  -n grep "grep -rl '\"\$imagepolicy\"' $tree" \
  -n lint "$bin $tree -o json" \
  -n simulate "$bin $tree --set $set_flag --simulate -o json"
python3 - "$out" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
g = r["grep"]["median"]
for k in ("lint", "simulate"):
    print(f"{k}: median {r[k]['median']*1000:.1f} ms = {r[k]['median']/g:.2f}x grep ({g*1000:.1f} ms)")
PY
for mode in "" "--set $set_flag --simulate"; do
  # shellcheck disable=SC2086
  rss=$(/usr/bin/time -f %M "$bin" "$tree" $mode -o json 2>&1 >/dev/null | tail -1)
  echo "peak RSS ${mode:+(simulate) }${mode:-(lint)}: $((rss / 1024)) MB"
done
rm -f "$out"
