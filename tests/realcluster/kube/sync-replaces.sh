#!/usr/bin/env bash
# Pins k8s.io/kubernetes at $KUBE_VERSION in this module and writes the `replace` lines for its
# staging modules, generated from that release's own go.mod (its `k8s.io/x => ./staging/...`
# lines become `k8s.io/x => k8s.io/x v0.<minor>.<patch>`, the tag every staging module carries
# for the release). Never hand-edit the replace block: rerun this after changing the version.
set -euo pipefail
cd "$(dirname "$0")"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
KUBE_VERSION="${KUBE_VERSION:-$(sed -n 's/.*k8s.io\/kubernetes \(v[0-9.]*\).*/\1/p' go.mod | head -1)}"
[ -n "$KUBE_VERSION" ] || { echo "sync-replaces: no k8s.io/kubernetes version in go.mod (set KUBE_VERSION)" >&2; exit 1; }
staging="v0.${KUBE_VERSION#v1.}"
gomod=$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
[ -f "$gomod" ] || { echo "sync-replaces: no go.mod for k8s.io/kubernetes@${KUBE_VERSION}" >&2; exit 1; }
for mod in $(sed -n 's/^\s*\(k8s.io\/[a-z0-9-]*\) => \.\/staging\/src\/.*$/\1/p' "$gomod"); do
  go mod edit -replace "${mod}=${mod}@${staging}"
done
go mod edit -require "k8s.io/kubernetes@${KUBE_VERSION}"
echo "sync-replaces: k8s.io/kubernetes ${KUBE_VERSION}, staging modules at ${staging}" >&2
