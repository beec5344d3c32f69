//go:build tools

// Package tools pins the Flux api modules whose CRDs build.sh generates with controller-gen
// (`go tool controller-gen crd paths=<module dir>/...`). Their controllers are not built: the
// Go module proxy refuses helm-controller, image-reflector-controller and
// image-automation-controller (403), while their api modules are served.
package tools

import (
	_ "github.com/fluxcd/helm-controller/api/v2"
	_ "github.com/fluxcd/image-automation-controller/api/v1"
	_ "github.com/fluxcd/image-reflector-controller/api/v1"
)
