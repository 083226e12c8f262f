#!/usr/bin/env bash
# Build the lab's real control-plane binaries from Go modules, cached outside the clone.
#   go-binaries.sh etcd VERSION          -> $GPUFLEET_LAB_CACHE/bin/etcd-VERSION/{etcd,etcdctl,etcdutl}
#   go-binaries.sh kubernetes VERSION    -> $GPUFLEET_LAB_CACHE/bin/kubernetes-VERSION/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl,kubeadm}
#   go-binaries.sh kwok VERSION          -> $GPUFLEET_LAB_CACHE/bin/kwok-VERSION/kwok
#   go-binaries.sh versitygw VERSION     -> $GPUFLEET_LAB_CACHE/bin/versitygw-VERSION/versitygw (the S3 server)
#   go-binaries.sh helm VERSION          -> $GPUFLEET_LAB_CACHE/bin/helm-VERSION/helm (the addons stage's Helm)
#   go-binaries.sh kubelet-configz VERSION -> $GPUFLEET_LAB_CACHE/bin/kubelet-configz-VERSION/kubelet-configz (what a
#                                           kubelet of VERSION serves at /configz for a config file)
#   go-binaries.sh rbac-table VERSION    -> $GPUFLEET_LAB_CACHE/bin/rbac-table-VERSION/kubeadm-rbac.json (the RBAC
#                                           kubeadm's upgrade phases create, for bin/rbac-table)
# No registry ships these binaries here; the Go module proxy ships their sources (docs/reference.md section 9).
# A finished build leaves a .done stamp holding what it was built from (the lab's own Go source, for the builds
# that have one); a rerun with that stamp present does nothing.
set -Eeuo pipefail
what=${1:?usage: go-binaries.sh etcd|kubernetes|kwok VERSION}
version=${2:?version}
cache=${GPUFLEET_LAB_CACHE:-$HOME/.cache/gpufleet/lab}
here=$(cd "$(dirname "$0")" && pwd)
out="$cache/bin/$what-$version"
stamp=""
[[ -f "$here/$what/main.go" ]] && stamp=$(sha256sum "$here/$what/main.go" | cut -c1-64)
[[ -f "$out/.done" && "$(cat "$out/.done")" == "$stamp" ]] && { echo "lab build: $what $version cached in $out"; exit 0; }
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
export GOMODCACHE=${GOMODCACHE:-$cache/gomod} GOCACHE=${GOCACHE:-$cache/gocache}
mkdir -p "$cache"  # a fresh machine has no cache directory yet
work=$(mktemp -d "$cache/build-$what-XXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
cd "$work"
if [[ -n "${GPUFLEET_LAB_BUILD_DRY_RUN:-}" ]]; then
  # Set-up checks of a fresh machine (tests/unit/lab/test_fresh_machine.py): everything above ran; stop before
  # the downloads and the compile.
  command -v go >/dev/null || { echo "lab build: go not found on PATH (install Go 1.24 or later)" >&2; exit 1; }
  go version
  go mod init gpufleet.lab/dry-run 2>&1
  echo "lab build: dry run - $what $version would build in $work (cache $cache, module cache $GOMODCACHE)"
  exit 0
fi
echo "lab build: $what $version (module cache $GOMODCACHE; this takes minutes the first time)"
started=$(date +%s)
# A module that requires k8s.io/kubernetes $version, its staging modules replaced by their own versions
# (k8s.io/kubernetes replaces them with relative paths, which a module from the proxy cannot use).
kubernetes_module() {
  local staging_version="v0.${version#v1.}" s
  go mod init "$1" >/dev/null 2>&1
  local staging="api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
    cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api cri-client
    csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator
    kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission
    sample-apiserver sample-cli-plugin sample-controller"
  {
    echo "require k8s.io/kubernetes $version"
    for s in $staging; do echo "replace k8s.io/$s => k8s.io/$s $staging_version"; done
  } >> go.mod
}
case "$what" in
  etcd)
    go mod init gpufleet.lab/etcd >/dev/null 2>&1
    for m in server etcdctl etcdutl; do
      go get "go.etcd.io/etcd/$m/v3@$version" >/dev/null
    done
    go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3
    go build -trimpath -ldflags "-s -w" -o "$out/etcdctl" go.etcd.io/etcd/etcdctl/v3
    go build -trimpath -ldflags "-s -w" -o "$out/etcdutl" go.etcd.io/etcd/etcdutl/v3
    ;;
  kubernetes)
    minor=$(echo "$version" | sed -E 's/^v1\.([0-9]+)\..*/\1/')
    kubernetes_module gpufleet.lab/kubernetes
    cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubeadm"
)
GO
    go mod tidy >/dev/null 2>&1 || go mod tidy
    ld="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1"
    ld="$ld -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
    ld="$ld -X k8s.io/client-go/pkg/version.gitVersion=$version -X k8s.io/client-go/pkg/version.gitMajor=1"
    ld="$ld -X k8s.io/client-go/pkg/version.gitMinor=$minor"
    # One go build for every command, so the links overlap the compiles (a cache from before kubeadm was added
    # builds only it)
    missing=()
    for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl kubeadm; do
      [[ -x "$out/$cmd" ]] || missing+=("k8s.io/kubernetes/cmd/$cmd")
    done
    if ((${#missing[@]})); then  # built beside, then moved in: a build cut short leaves no half-written command
      go build -trimpath -ldflags "$ld" -o "$work/bin/" "${missing[@]}"
      mv "$work/bin/"* "$out/"
      echo "lab build: ${missing[*]##*/} $version built"
    fi
    ;;
  kwok)
    GOBIN="$out" go install "sigs.k8s.io/kwok/cmd/kwok@$version"
    # KWOK's own stage definitions, from the same module: nodes Ready at once with lease heartbeats, pods fast.
    stages="$GOMODCACHE/sigs.k8s.io/kwok@$version/kustomize/stage"
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
             pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
      echo "---"; cat "$stages/$f"
    done > "$out/stages.yaml"
    ;;
  versitygw)
    # Versity S3 Gateway (Apache-2.0): a real S3 API server over a POSIX directory, with SigV4 authentication
    GOBIN="$out" go install -trimpath -ldflags "-s -w" "github.com/versity/versitygw/cmd/versitygw@$version"
    ;;
  helm)
    # The Helm CLI (Apache-2.0), v3: the line kubernetes.core.helm is written for; it stores releases as Secrets
    ld="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
    GOBIN="$out" go install -trimpath -ldflags "$ld" "helm.sh/helm/v3/cmd/helm@$version"
    ;;
  rbac-table)
    # kubeadm's upgrade phases run against a fake clientset of the same release (lab/build/rbac-table/main.go)
    kubernetes_module gpufleet.lab/rbac-table
    cp "$here/rbac-table/main.go" .
    go mod tidy >/dev/null 2>&1 || go mod tidy
    go build -trimpath -ldflags "-s -w" -o "$work/rbac-table" .
    "$work/rbac-table" > "$out/kubeadm-rbac.json"
    ;;
  kubelet-configz)
    # What a kubelet of this release serves at /configz for a config file, through its own loader, defaults and
    # validation (lab/build/kubelet-configz/main.go); the lab's simulated kubelets answer with it
    kubernetes_module gpufleet.lab/kubelet-configz
    cp "$here/kubelet-configz/main.go" .
    go mod tidy >/dev/null 2>&1 || go mod tidy
    go build -trimpath -ldflags "-s -w" -o "$out/kubelet-configz" .
    ;;
  *) echo "unknown build $what" >&2; exit 2 ;;
esac
echo -n "$stamp" > "$out/.done"
echo "lab build: $what $version done in $(( $(date +%s) - started )) s -> $out"
