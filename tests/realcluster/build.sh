#!/usr/bin/env bash
# Builds the real control plane and the real Flux controllers for tests/realcluster from Go
# modules only, once, into a cache keyed by content. Prints the bin directory on stdout
# (progress on stderr: one line per stage with its elapsed and expected cold time). A second run
# with nothing changed prints it at once.
#
#   build.sh [all|demo|gateway]     (default all; or CLUSTER_LOOP_BUILD_SET)
#     demo: only what ./demo runs: kube/ and flux/ (the control plane, source-controller and the
#           current kustomize-controller), image/ (image-reflector- and
#           image-automation-controller, the OCI registry and crane), envoygateway/ and metallb/
#     all:  everything the tests run: demo's set and the modules below but the gateway ones
#     gateway: all, and envoygateway/ and metallb/ (a cluster with a Gateway option)
#     module:NAME: that module alone (e.g. module:image), into its own cache dir, printed
#
#   kube/    k8s.io/kubernetes (kube-apiserver, kube-controller-manager) + our embedded-etcd main
#   flux/    source-controller and kustomize-controller (current release) as Go tools
#   kc17/    kustomize-controller v1.7.3 (the CancelHealthCheckOnNewRevision v1.7 generation)
#   image/   image-reflector-controller and image-automation-controller as Go tools, and
#            go-containerregistry's registry and crane (a real OCI registry for the tests)
#   helm/    helm-controller as a Go tool
#   krew/    krew (sigs.k8s.io/krew), the real `kubectl krew` for the dist tests
#   fluxcli/ the flux CLI (github.com/fluxcd/flux2/v2), the real `flux plugin` for the dist tests;
#            built in a writable copy of its own module (see build_flux_cli)
#   node/    the real node (opt-in, built only by `build.sh module:node`, what a cluster with
#            ClusterOptions::real_kubelet runs): containerd v2.4.2 (+ its runc shim), runc v1.5.3
#            (cgo, `-tags seccomp`: needs libseccomp-dev), the CNI plugins v1.9.1 (bridge,
#            host-local, loopback) as Go tools, and the kubelet of kube/'s go.mod
#            (k8s.io/kubernetes/cmd/kubelet, stamped as kube-apiserver is); never in `demo`/`all`
#   envoygateway/  Envoy Gateway v1.9.1 (cmd/envoy-gateway) and, from the same module graph, the
#            Gateway API standard CRDs of sigs.k8s.io/gateway-api v1.6.3; metallb/  MetalLB
#            v0.15.2's controller (v0.16.2 does not build: see src/gateway.rs). Built only by
#            `build.sh gateway` (what a cluster with a Gateway option runs). A module's
#            crds.txt lists extra CRD sources: `MODULE DIR GLOB NAME` copies DIR/GLOB of MODULE
#            (as the module graph resolves it) into <out>/crds/NAME-<its version>/.
#   kube/ and flux/ are the main output ($cache/<key>, the key: their go.mod and Go sources). Every
#   other module has its own cache key ($cache/<module>-<key>: its go.mod, *.go, the Go version,
#   its recipe) and is left out of the main key (changing it never rebuilds kube-apiserver);
#   its binaries and CRDs are linked into the main output: <bin>/<name>-<version>,
#   <bin>/../crds/<name>-<version>/.
#
# Env: CLUSTER_LOOP_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/cluster-loop).
# Go: the machine's own toolchain (GOTOOLCHAIN=local): every pinned module builds with Go 1.26.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
set_name="${1:-${CLUSTER_LOOP_BUILD_SET:-all}}"
case "$set_name" in
module:*) ;; # one module alone, into its own cache dir (printed); the main output untouched
all) modules=(kc17 image helm krew fluxcli) ;;
gateway) modules=(kc17 image helm krew fluxcli envoygateway metallb) ;;
demo) modules=(image envoygateway metallb) ;;
*) echo "build.sh: unknown set '$set_name' (all, demo, gateway or module:NAME)" >&2; exit 2 ;;
esac
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
command -v go >/dev/null || { echo "build.sh: go is not on PATH (Go 1.26 is needed)" >&2; exit 1; }
cache="${CLUSTER_LOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-loop}/realcluster"
# Cold build time of each stage on an idle 2-core machine, in seconds of wall time, for the
# progress lines: the CPU seconds measured into a fresh GOCACHE (tests/realcluster/README.md,
# "Cold build") over the two cores, links being single-threaded. A warm Go cache is faster.
declare -A expect=([kube]=480 [flux]=330 [kc17]=220 [image]=170 [helm]=120 [krew]=15 [fluxcli]=80 [node]=480)
start=$(date +%s)
step() { echo "build.sh: [$(( $(date +%s) - start ))s] $*" >&2; }
stage_start=0
stage() { # NAME WHAT: a stage begins
  stage_start=$(date +%s)
  if [ -n "${expect[$1]:-}" ]; then
    step "$2 (cold: about $(( (${expect[$1]} + 59) / 60 )) min on 2 cores)"
  else
    step "$2 (cold time not measured yet)"
  fi
}
stage_done() { # NAME
  step "$1 done in $(( $(date +%s) - stage_start ))s${expect[$1]:+ (cold estimate ${expect[$1]}s)}"
}
# The main key: what decides kube/'s and flux/'s binaries (go.mod pins every version; our Go
# sources; the Go version; the recipe below, by its version number). go.sum is left out: it only
# verifies, and `go build -mod=mod` / `go vet` add lines to it without changing any input.
recipe=2
key=$( (cd "$here" && find ./kube ./flux \( -name '*.go' -o -name go.mod \) -print | LC_ALL=C sort | xargs sha256sum; go version; echo "recipe $recipe") | sha256sum | cut -c1-16)
out="$cache/$key"
# The version stamp of kube/'s binaries (kube-apiserver, kube-controller-manager; node/'s kubelet).
kube_ldflags() {
  local kube_version minor
  kube_version=$(sed -n 's/.*k8s.io\/kubernetes \(v[0-9.]*\).*/\1/p' "$here/kube/go.mod" | head -1)
  minor=$(echo "$kube_version" | cut -d. -f2)
  echo "-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z -X k8s.io/client-go/pkg/version.gitVersion=$kube_version"
}
# The Go tools of one module ($1: e.g. kc17 or image) into <out>/bin/<name>-<version> and their
# CRDs (config/crd/bases/*.yaml of the controller's own module, as released with it) into
# <out>/crds/<name>-<version>/, once per module key; then linked into the binaries' dir
# ($out/bin, $out/crds) by an atomic rename of a fresh link. A lock keeps parallel test binaries
# from building the same module twice; a temporary dir renamed into place keeps a half-built one
# from ever looking complete.
mod_recipe=2
tools_of() { (cd "$here/$1" && go mod edit -json | python3 -c 'import json,sys; [print(t["Path"]) for t in json.load(sys.stdin).get("Tool") or []]'); }
build_tools() { # MODULE_DIR OUT_DIR
  local m=$1 o=$2 tool ver name dir ld tags
  for tool in $(tools_of "$m"); do
    # The version and dir of the module that holds the tool (package) path.
    ver=$(cd "$here/$m" && go list -f '{{.Module.Version}}' "$tool")
    name="$(basename "$tool")"
    # MetalLB's tool is .../metallb/controller: metallb-controller-<v>.
    [ "$name" = controller ] && name="$(basename "$(dirname "$tool")")-controller"
    step "building $name $ver"
    ld="-s -w"
    # krew prints its release from these (hack/make-binaries.sh of the release).
    [ "$name" = krew ] && ld="$ld -X sigs.k8s.io/krew/internal/version.gitTag=$ver -X sigs.k8s.io/krew/internal/version.gitCommit=$ver"
    # containerd stamps its release as its Makefile does (else "2.4.2+unknown", which the CRI
    # reports as the node's containerRuntimeVersion).
    case "$name" in containerd*) ld="$ld -X github.com/containerd/containerd/v2/version.Version=${ver#v}" ;; esac
    # runc needs seccomp (the kubelet's RuntimeDefault profile): cgo and libseccomp-dev. Without
    # the tag runc fails every container: "seccomp: config provided but seccomp not supported".
    tags=()
    if [ "$name" = runc ]; then
      [ -f /usr/include/seccomp.h ] || { echo "build.sh: runc needs libseccomp-dev (apt-get install libseccomp-dev)" >&2; return 1; }
      tags=(-tags=seccomp)
    fi
    (cd "$here/$m" && go build -trimpath "${tags[@]}" -ldflags "$ld" -o "$o/bin/$name-$ver" "$tool")
    # A controller's CRDs from its own module (config/crd/bases), as released with it; other
    # tools (image/'s registry and crane, krew) have none.
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
# The flux CLI into OUT_DIR/bin/flux-<version>. `go install .../cmd/flux@v2.9.5` is refused
# ("The go.mod file for the module providing named packages contains one or more replace
# directives"), and building the tool from our module fails on `//go:embed manifests/*.yaml`
# (cmd/flux/manifests is generated by the release's manifests/scripts/bundle.sh and is not in
# the module). So: a writable copy of the module our fluxcli/go.mod pins (from the module cache,
# verified by our go.sum), built as its own main module (its own go.mod and replace lines, as
# its Makefile builds it: `go build -ldflags "-s -w -X main.VERSION=..." ./cmd/flux`). The
# embedded manifests are what bundle.sh builds offline from the module's own manifests/
# (rbac.yaml and policies.yaml with kubectl kustomize); the controllers' manifests, which
# bundle.sh downloads from the release pages, are left out: `flux install` and `flux bootstrap`
# of this build have no controllers to install. The tests use `flux plugin`, `flux version
# --client` and `flux --help` only.
build_flux_cli() { # OUT_DIR
  local o=$1 mod=github.com/fluxcd/flux2/v2 ver dir src
  # Not `go list` of the package: it reports the embed error above.
  ver=$(cd "$here/fluxcli" && go list -m -f '{{.Version}}' "$mod")
  dir=$(cd "$here/fluxcli" && go mod download -json "$mod@$ver" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  step "building flux $ver (a copy of its module, built as its own main module)"
  src=$(mktemp -d "$o/.flux2-src.XXXXXX")
  cp -r "$dir"/. "$src/"
  chmod -R u+w "$src"
  mkdir -p "$src/cmd/flux/manifests"
  kubectl kustomize "$src/manifests/rbac" >"$src/cmd/flux/manifests/rbac.yaml"
  kubectl kustomize "$src/manifests/policies" >"$src/cmd/flux/manifests/policies.yaml"
  (cd "$src" && go build -trimpath -ldflags "-s -w -X main.VERSION=${ver#v}" -o "$o/bin/flux-$ver" ./cmd/flux)
  rm -rf "$src"
}
# Builds one module into $cache/<module>-<key> (once) and sets mout to that dir.
module_build() { # MODULE_DIR
  local m=$1 mkey tmp lock
  mkey=$( (cd "$here/$m" && find . \( -name '*.go' -o -name go.mod -o -name crds.txt \) -print | LC_ALL=C sort | xargs sha256sum; go version; echo "module recipe $mod_recipe"; [ "$m" != node ] || { sha256sum <"$here/kube/go.mod"; echo "node recipe 2"; }) | sha256sum | cut -c1-16)
  mout="$cache/$m-$mkey"
  if [ ! -f "$mout/.complete" ]; then
    mkdir -p "$cache"
    exec {lock}>"$cache/.$m.lock"
    flock "$lock"
    if [ ! -f "$mout/.complete" ]; then
      stage "$m" "module $m/"
      tmp=$(mktemp -d "$cache/.$m-tmp.XXXXXX"); chmod 755 "$tmp"
      if [ "$m" = fluxcli ]; then build_flux_cli "$tmp"; else build_tools "$m" "$tmp"; fi
      if [ "$m" = node ]; then
        step "building kubelet (k8s.io/kubernetes/cmd/kubelet of kube/'s go.mod)"
        kv=$(sed -n 's/.*k8s.io\/kubernetes \(v[0-9.]*\).*/\1/p' "$here/kube/go.mod" | head -1)
        (cd "$here/kube" && go build -trimpath -ldflags "$(kube_ldflags)" -o "$tmp/bin/kubelet-$kv" k8s.io/kubernetes/cmd/kubelet)
        # The pod sandbox's process: the release's own pause.c (build/pause/linux of the
        # k8s.io/kubernetes module), static as its Makefile builds it; packaged as the sandbox
        # image into the cluster's OCI registry at start (src/realnode.rs).
        step "building pause (build/pause/linux/pause.c of k8s.io/kubernetes $kv)"
        gcc -Os -Wall -Werror -static -DVERSION="$kv" -o "$tmp/bin/pause-$kv" \
          "$(cd "$here/kube" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c"
      fi
      touch "$tmp/.complete"
      mv -T "$tmp" "$mout"
      stage_done "$m"
    fi
    exec {lock}>&-
  fi
}
# The CRDs of one module's controllers alone (no build: the released config/crd/bases of each
# tool's module, downloaded), into $cache/<module>-crds-<key>/crds/<name>-<version>/, linked as
# module() links them. For the demo set: every cluster installs the image and helm CRDs
# (the clusters/ fleet has ImagePolicies) while only the demo's controllers run; a later
# `all` build replaces the links with the built module's.
module_crds() { # MODULE_DIR
  local m=$1 mkey cout tmp tool mv dir name f
  mkey=$( (cd "$here/$m" && cat go.mod; echo "crds recipe $mod_recipe") | sha256sum | cut -c1-16)
  cout="$cache/$m-crds-$mkey"
  if [ ! -f "$cout/.complete" ]; then
    mkdir -p "$cache"
    tmp=$(mktemp -d "$cache/.$m-crds-tmp.XXXXXX"); chmod 755 "$tmp"
    for tool in $(tools_of "$m"); do
      # The required module that holds the tool's package (the longest path prefix).
      mv=$(cd "$here/$m" && go mod edit -json | python3 -c '
import json, sys
tool = sys.argv[1]
req = [r for r in json.load(sys.stdin).get("Require") or [] if tool == r["Path"] or tool.startswith(r["Path"] + "/")]
req.sort(key=lambda r: len(r["Path"]))
print(req[-1]["Path"] + "@" + req[-1]["Version"] if req else "")' "$tool")
      [ -n "$mv" ] || continue
      dir=$(cd "$here/$m" && go mod download -json "$mv" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("Dir", ""))')
      [ -d "$dir/config/crd/bases" ] || continue
      name="$(basename "$tool")"
      mkdir -p "$tmp/crds/$name-${mv#*@}"
      cp "$dir"/config/crd/bases/*.yaml "$tmp/crds/$name-${mv#*@}/"
      chmod -R u+w "$tmp/crds"
    done
    touch "$tmp/.complete"
    mv -T "$tmp" "$cout" 2>/dev/null || rm -rf "$tmp" # a parallel run got there first
  fi
  mkdir -p "$out/crds"
  for f in "$cout"/crds/*; do
    [ -e "$f" ] || continue
    # A built module's link (module(), not a -crds- dir) is kept: it holds the same CRDs.
    case "$(readlink "$out/crds/$(basename "$f")" 2>/dev/null)" in "" | *-crds-*) ;; *) continue ;; esac
    ln -sfn "$f" "$out/crds/.$(basename "$f").$$"
    mv -T "$out/crds/.$(basename "$f").$$" "$out/crds/$(basename "$f")"
  done
}
module() { # MODULE_DIR: built, then linked into the main output
  local f
  module_build "$1"
  mkdir -p "$out/bin" "$out/crds"
  for f in "$mout"/bin/* "$mout"/crds/*; do
    [ -e "$f" ] || continue
    local sub; sub=$(basename "$(dirname "$f")")
    ln -sfn "$f" "$out/$sub/.$(basename "$f").$$"
    mv -T "$out/$sub/.$(basename "$f").$$" "$out/$sub/$(basename "$f")"
  done
}
if [[ "$set_name" == module:* ]]; then
  m=${set_name#module:}
  [ -f "$here/$m/go.mod" ] && [ "$m" != kube ] && [ "$m" != flux ] || { echo "build.sh: no module '$m' (one of: ${!expect[*]}, less kube and flux)" >&2; exit 2; }
  module_build "$m"
  echo "$mout"
  exit 0
fi
if [ ! -f "$out/.complete" ]; then
  # One build of the main output at a time (./demo starts one in the background before its
  # Rust build; the demo's cluster start then runs build.sh again and waits here).
  mkdir -p "$cache"
  exec {main_lock}>"$cache/.main.lock"
  if ! flock -n "$main_lock"; then
    step "waiting for the build of kube/ and flux/ already running (see its progress above)"
    flock "$main_lock"
  fi
fi
if [ ! -f "$out/.complete" ]; then
  mkdir -p "$out/bin"
  kube_version=$(sed -n 's/.*k8s.io\/kubernetes \(v[0-9.]*\).*/\1/p' "$here/kube/go.mod" | head -1)
  step "downloading modules (first run: about 1 GB, a few minutes)"
  for m in kube flux; do (cd "$here/$m" && go mod download) & done; wait
  ld=$(kube_ldflags)
  stage kube "building kube-apiserver, kube-controller-manager $kube_version and etcd"
  (cd "$here/kube" && go build -trimpath -ldflags "$ld" -o "$out/bin/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager ./cmd/etcd)
  stage_done kube
  stage flux "module flux/"
  build_tools flux "$out"
  stage_done flux
  "$out/bin/kube-apiserver" --version >&2
  touch "$out/.complete"
fi
for m in "${modules[@]}"; do module "$m"; done
if [ "$set_name" = demo ]; then module_crds image; module_crds helm; fi
step "done ($set_name): $out/bin"
echo "$out/bin"
