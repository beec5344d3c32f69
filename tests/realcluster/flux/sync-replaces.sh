#!/usr/bin/env bash
# Copies the `replace` lines of the Flux controllers this module builds as Go tools into this
# go.mod. A dependency's replace lines do not apply when it is built from another module, so
# without them the build uses other versions than the controller's own release (e.g. its
# go-digest pin for BLAKE3). Local replaces (`=> ./api`) are left out: the api modules come from
# the proxy at the versions the controllers require. Generated, never hand-copied: rerun this
# after changing a controller version. Usage: sync-replaces.sh [MODULE_DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")}"
export GOFLAGS=-mod=mod
for tool in $(go mod edit -json | python3 -c 'import json,sys; [print(t["Path"]) for t in json.load(sys.stdin).get("Tool") or []]'); do
  # The module that holds the tool's package (a tool may be a package below its module root,
  # e.g. go-containerregistry's cmd/crane).
  mod=$(go list -f '{{.Module.Path}}@{{.Module.Version}}' "$tool")
  gomod=$(go mod download -json "$mod" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  go mod edit -json "$gomod" | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    new = r["New"]
    if new["Path"].startswith("."):
        continue
    old = r["Old"]["Path"] + ("@" + r["Old"]["Version"] if r["Old"].get("Version") else "")
    print(old + "=" + new["Path"] + "@" + new["Version"])
' | while read -r rep; do go mod edit -replace "$rep"; echo "sync-replaces: $mod: $rep" >&2; done
done
# `go mod tidy` would also resolve the tools' test-only imports, some of which the proxy refuses;
# the build (GOFLAGS=-mod=mod) records what it needs in go.sum instead.
