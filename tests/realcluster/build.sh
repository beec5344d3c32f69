#!/usr/bin/env bash
# Builds the real control plane and the real Flux controllers for tests/realcluster from Go
# modules only, once, into a cache keyed by this directory's go.mod/go.sum/Go sources and this
# script. Prints the bin directory on stdout (progress on stderr). A second run with nothing
# changed prints it at once.
#
#   kube/   k8s.io/kubernetes (kube-apiserver, kube-controller-manager) + our embedded-etcd main
#   flux/   source-controller and kustomize-controller (current release) as Go tools
#   kc17/   kustomize-controller v1.7.3 (the CancelHealthCheckOnNewRevision v1.7 generation)
#   crds/   CRDs generated with controller-gen (a Go tool of that module) from the api modules of
#           helm-controller, image-reflector-controller and image-automation-controller, whose
#           controllers the Go module proxy refuses (403). Own cache key ($cache/crds-<key>),
#           linked from <bin>/../crds/generated; crds/ is left out of the binaries' key.
#
# Env: CLUSTER_LOOP_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/cluster-loop).
# Go: the machine's own toolchain (GOTOOLCHAIN=local): every pinned module builds with Go 1.26.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
command -v go >/dev/null || { echo "build.sh: go is not on PATH (Go 1.26 is needed)" >&2; exit 1; }
cache="${CLUSTER_LOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-loop}/realcluster"
# The cache key: what decides the binaries (go.mod pins every version; our Go sources; the Go
# version; the recipe below, by its version number). go.sum is left out: it only verifies, and
# `go build -mod=mod` / `go vet` add lines to it without changing any input.
recipe=1
key=$( (cd "$here" && find . -path ./crds -prune -o \( -name '*.go' -o -name go.mod \) -print | LC_ALL=C sort | xargs sha256sum; go version; echo "recipe $recipe") | sha256sum | cut -c1-16)
out="$cache/$key"
# Generated CRDs (crds/ module): their own key (crds/go.mod, crds/*.go, Go version, recipe), so
# changing them never rebuilds the binaries. Generated into a temporary dir and renamed into
# place (parallel test binaries may run this script at once), then linked from the binaries'
# dir as crds/generated (an atomic rename of a fresh link).
crd_recipe=1
crd_key=$( (cd "$here/crds" && find . -name '*.go' -o -name go.mod | LC_ALL=C sort | xargs sha256sum; go version; echo "crd recipe $crd_recipe") | sha256sum | cut -c1-16)
crd_out="$cache/crds-$crd_key"
generate_crds() {
  if [ ! -f "$crd_out/.complete" ]; then
    echo "build.sh: generating the HelmRelease and image automation CRDs with controller-gen (cold: about 1 minute)" >&2
    local tmp paths=()
    mkdir -p "$cache"; tmp=$(mktemp -d "$cache/.crds-tmp.XXXXXX"); chmod 755 "$tmp"
    for api in $(cd "$here/crds" && go list -m -f '{{if not .Main}}{{.Path}}{{end}}' all | grep -E '^github.com/fluxcd/(helm|image-reflector|image-automation)-controller/api$'); do
      paths+=("paths=$api/...")
    done
    # As the controllers' Makefiles do (CRD_OPTIONS ?= crd:crdVersions=v1; output:crd:artifacts:config=config/crd/bases).
    (cd "$here/crds" && go tool controller-gen crd:crdVersions=v1 "${paths[@]}" output:crd:dir="$tmp")
    [ "$(ls "$tmp"/*.yaml | wc -l)" -ge 4 ] || { echo "build.sh: controller-gen wrote fewer than 4 CRDs into $tmp" >&2; exit 1; }
    touch "$tmp/.complete"
    mv -T "$tmp" "$crd_out" 2>/dev/null || rm -rf "$tmp"
  fi
  mkdir -p "$out/crds"
  ln -s "$crd_out" "$out/crds/.generated.$$"
  mv -T "$out/crds/.generated.$$" "$out/crds/generated"
}
if [ -f "$out/.complete" ]; then generate_crds; echo "$out/bin"; exit 0; fi
mkdir -p "$out/bin"
kube_version=$(sed -n 's/.*k8s.io\/kubernetes \(v[0-9.]*\).*/\1/p' "$here/kube/go.mod" | head -1)
minor=$(echo "$kube_version" | cut -d. -f2)
start=$(date +%s)
step() { echo "build.sh: [$(( $(date +%s) - start ))s] $*" >&2; }
step "downloading modules (first run: about 1.5 GB, a few minutes)"
for m in kube flux kc17 crds; do (cd "$here/$m" && go mod download) & done; wait
ld="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z -X k8s.io/client-go/pkg/version.gitVersion=$kube_version"
step "building kube-apiserver, kube-controller-manager $kube_version and etcd (cold: about 10 minutes on 2 cores)"
(cd "$here/kube" && go build -trimpath -ldflags "$ld" -o "$out/bin/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager ./cmd/etcd)
for m in flux kc17; do
  suffix=""; [ "$m" = kc17 ] && suffix="-v1.7"
  for tool in $(cd "$here/$m" && go mod edit -json | python3 -c 'import json,sys; [print(t["Path"]) for t in json.load(sys.stdin).get("Tool") or []]'); do
    ver=$(cd "$here/$m" && go list -m -f '{{.Version}}' "$tool")
    name="$(basename "$tool")"
    step "building $name $ver"
    (cd "$here/$m" && go build -trimpath -ldflags "-s -w" -o "$out/bin/$name-$ver" "$tool")
    # CRDs from the controller's own module (config/crd/bases), as released with it.
    dir=$(cd "$here/$m" && go list -m -f '{{.Dir}}' "$tool")
    mkdir -p "$out/crds/$name-$ver"
    cp "$dir"/config/crd/bases/*.yaml "$out/crds/$name-$ver/"
    chmod -R u+w "$out/crds/$name-$ver"
  done
done
"$out/bin/kube-apiserver" --version >&2
touch "$out/.complete"
generate_crds
step "done: $out/bin"
echo "$out/bin"
