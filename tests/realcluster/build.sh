#!/usr/bin/env bash
# Builds the real control plane and the real Flux controllers for tests/realcluster from Go
# modules only, once, into a cache keyed by this directory's go.mod/go.sum/Go sources and this
# script. Prints the bin directory on stdout (progress on stderr). A second run with nothing
# changed prints it at once.
#
#   kube/   k8s.io/kubernetes (kube-apiserver, kube-controller-manager) + our embedded-etcd main
#   flux/   source-controller and kustomize-controller (current release) as Go tools
#   kc17/   kustomize-controller v1.7.3 (the CancelHealthCheckOnNewRevision v1.7 generation)
#   image/  image-reflector-controller v1.1.1 and image-automation-controller v1.1.2 as Go tools,
#           and go-containerregistry's registry and crane (a real OCI registry for the tests)
#   helm/   helm-controller v1.4.3 as a Go tool
#           image/ and helm/ pin other Kubernetes/controller-runtime/fluxcd/pkg versions than flux/,
#           so each is its own module with its own cache key ($cache/<module>-<key>: its go.mod,
#           *.go, the Go version, its recipe) and is left out of the key of the binaries above
#           (changing them never rebuilds kube-apiserver). Their binaries and CRDs are linked
#           into the main output: <bin>/<name>-<version>, <bin>/../crds/<name>-<version>/.
#   envoygateway/  Envoy Gateway v1.9.1 (cmd/envoy-gateway) and, from the same module graph, the
#           Gateway API standard CRDs of sigs.k8s.io/gateway-api v1.6.3; metallb/  MetalLB
#           v0.15.2's controller (v0.16.2 does not build: see src/gateway.rs). Built only by `build.sh gateway` (what a cluster with a Gateway
#           option runs), each with its own cache key like image/ and helm/. A module's
#           crds.txt lists extra CRD sources: `MODULE DIR GLOB NAME` copies DIR/GLOB of MODULE
#           (as the module graph resolves it) into <out>/crds/NAME-<its version>/.
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
key=$( (cd "$here" && find . \( -path ./crds -o -path ./image -o -path ./helm -o -path ./envoygateway -o -path ./metallb \) -prune -o \( -name '*.go' -o -name go.mod \) -print | LC_ALL=C sort | xargs sha256sum; go version; echo "recipe $recipe") | sha256sum | cut -c1-16)
out="$cache/$key"
# The Go tools of one module ($1: image or helm) into <out>/bin/<name>-<version> and their CRDs
# (config/crd/bases/*.yaml of the controller's own module, as released with it) into
# <out>/crds/<name>-<version>/, once per module key; then linked into the binaries' dir
# ($out/bin, $out/crds) by an atomic rename of a fresh link. A lock keeps parallel test binaries
# from building the same module twice; a temporary dir renamed into place keeps a half-built one
# from ever looking complete.
mod_recipe=1
tools_of() { (cd "$here/$1" && go mod edit -json | python3 -c 'import json,sys; [print(t["Path"]) for t in json.load(sys.stdin).get("Tool") or []]'); }
build_tools() { # MODULE_DIR OUT_DIR
  local m=$1 o=$2 tool ver name dir
  for tool in $(tools_of "$m"); do
    # The version and dir of the module that holds the tool (package) path.
    ver=$(cd "$here/$m" && go list -f '{{.Module.Version}}' "$tool")
    name="$(basename "$tool")"
    # MetalLB's tool is .../metallb/controller: metallb-controller-<v>.
    [ "$name" = controller ] && name="$(basename "$(dirname "$tool")")-controller"
    step "building $name $ver"
    (cd "$here/$m" && go build -trimpath -ldflags "-s -w" -o "$o/bin/$name-$ver" "$tool")
    # A controller's CRDs from its own module (config/crd/bases), as released with it; other
    # tools (image/'s registry and crane) have none.
    dir=$(cd "$here/$m" && go list -f '{{.Module.Dir}}' "$tool")
    [ -d "$dir/config/crd/bases" ] || continue
    mkdir -p "$o/crds/$name-$ver"
    cp "$dir"/config/crd/bases/*.yaml "$o/crds/$name-$ver/"
    chmod -R u+w "$o/crds/$name-$ver"
  done
  [ -f "$here/$m/crds.txt" ] || return 0
  local mod sub glob cname
  while read -r mod sub glob cname; do
    case "$mod" in ''|'#'*) continue ;; esac
    ver=$(cd "$here/$m" && go list -m -f '{{.Version}}' "$mod")
    dir=$(cd "$here/$m" && go list -m -f '{{.Dir}}' "$mod")
    mkdir -p "$o/crds/$cname-$ver"
    cp "$dir/$sub"/$glob "$o/crds/$cname-$ver/"
    chmod -R u+w "$o/crds/$cname-$ver"
  done < "$here/$m/crds.txt"
}
module() { # MODULE_DIR
  local m=$1 mkey mout tmp f lock
  mkey=$( (cd "$here/$m" && find . \( -name '*.go' -o -name go.mod -o -name crds.txt \) -print | LC_ALL=C sort | xargs sha256sum; go version; echo "module recipe $mod_recipe") | sha256sum | cut -c1-16)
  mout="$cache/$m-$mkey"
  if [ ! -f "$mout/.complete" ]; then
    mkdir -p "$cache"
    exec {lock}>"$cache/.$m.lock"
    flock "$lock"
    if [ ! -f "$mout/.complete" ]; then
      step "module $m/ (cold: see tests/realcluster/README.md for its build time)"
      tmp=$(mktemp -d "$cache/.$m-tmp.XXXXXX"); chmod 755 "$tmp"
      build_tools "$m" "$tmp"
      touch "$tmp/.complete"
      mv -T "$tmp" "$mout"
    fi
    exec {lock}>&-
  fi
  mkdir -p "$out/bin" "$out/crds"
  for f in "$mout"/bin/* "$mout"/crds/*; do
    local sub; sub=$(basename "$(dirname "$f")")
    ln -sfn "$f" "$out/$sub/.$(basename "$f").$$"
    mv -T "$out/$sub/.$(basename "$f").$$" "$out/$sub/$(basename "$f")"
  done
}
start=$(date +%s)
step() { echo "build.sh: [$(( $(date +%s) - start ))s] $*" >&2; }
gateway() { [ "${1:-}" != gateway ] || { module envoygateway; module metallb; }; }
if [ -f "$out/.complete" ]; then module image; module helm; gateway "${1:-}"; echo "$out/bin"; exit 0; fi
mkdir -p "$out/bin"
kube_version=$(sed -n 's/.*k8s.io\/kubernetes \(v[0-9.]*\).*/\1/p' "$here/kube/go.mod" | head -1)
minor=$(echo "$kube_version" | cut -d. -f2)
step "downloading modules (first run: about 1.5 GB, a few minutes)"
for m in kube flux kc17; do (cd "$here/$m" && go mod download) & done; wait
ld="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z -X k8s.io/client-go/pkg/version.gitVersion=$kube_version"
step "building kube-apiserver, kube-controller-manager $kube_version and etcd (cold: about 10 minutes on 2 cores)"
(cd "$here/kube" && go build -trimpath -ldflags "$ld" -o "$out/bin/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager ./cmd/etcd)
for m in flux kc17; do build_tools "$m" "$out"; done
"$out/bin/kube-apiserver" --version >&2
touch "$out/.complete"
module image
module helm
gateway "${1:-}"
step "done: $out/bin"
echo "$out/bin"
