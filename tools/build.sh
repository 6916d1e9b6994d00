#!/usr/bin/env bash
# Builds the local control plane's binaries from Go modules into $BIN (default .tools/bin).
#
#   tools/build.sh [GROUP...]     no GROUP: all of them
#
# Groups, so that each make target builds only what it runs:
#   control-plane  etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok
#                  (make cluster-up and make demo need nothing else)
#   helm           helm (the chart tests, make image's checks, the in-cluster tests)
#   node           the real kubelet node: kubelet, kube-proxy, containerd, ctr, CNI plugins
#   monitoring     Prometheus, promtool and prometheus-operator
#   karpenter      Karpenter's KWOK cloud provider (tools/karpenter) as karpenter, and its CRDs
#                  in karpenter-crds/ (Karpenter v1.14+ asks for a newer Go than 1.26.8: this
#                  group exports GOTOOLCHAIN=go1.27.3, the one approved way to get it)
#   compat         the compatibility lane's Kubernetes (tools/kubernetes-1.35) in $COMPAT_BIN
#                  (default .tools/k8s-1.35/bin): kube-apiserver, kube-controller-manager,
#                  kube-scheduler and kubectl
#
# Each binary is rebuilt only when its stamp (the pinned version plus the hash of its tools
# module's go.sum) differs, so a warm run does nothing. SCHEDPOLICY_TOOLS_BIN=/dir skips the
# build and checks that /dir already holds every binary of the groups asked for.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
BIN=${BIN:-$root/.tools/bin}
COMPAT_BIN=${COMPAT_BIN:-$root/.tools/k8s-1.35/bin}
all_groups=(control-plane helm node monitoring karpenter compat)
groups=("$@")
(( ${#groups[@]} )) || groups=("${all_groups[@]}")
declare -A want=()
for g in "${groups[@]}"; do
  [[ " ${all_groups[*]} " == *" $g "* ]] || { echo "tools: unknown group $g (${all_groups[*]})" >&2; exit 2; }
  want[$g]=1
done
wants() { [[ -n "${want[$1]:-}" ]]; }

names=()
wants control-plane && names+=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)
wants helm && names+=(helm)
wants node && names+=(kubelet kube-proxy containerd containerd-shim-runc-v2 ctr cni/bridge
  cni/host-local cni/loopback cni/portmap)
wants monitoring && names+=(prometheus promtool prometheus-operator prometheus-config-reloader)
wants karpenter && names+=(karpenter)

if [[ -n "${SCHEDPOLICY_TOOLS_BIN:-}" ]]; then
  missing=0
  for n in "${names[@]}"; do
    [[ -x "$SCHEDPOLICY_TOOLS_BIN/$n" ]] || { echo "tools: $SCHEDPOLICY_TOOLS_BIN/$n is missing" >&2; missing=1; }
  done
  if wants compat; then
    for n in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
      [[ -x "$COMPAT_BIN/$n" ]] || { echo "tools: $COMPAT_BIN/$n is missing" >&2; missing=1; }
    done
  fi
  (( missing == 0 )) || exit 1
  echo "tools: using prebuilt binaries from SCHEDPOLICY_TOOLS_BIN=$SCHEDPOLICY_TOOLS_BIN"
  exit 0
fi

# The real node's host parts come from Debian: runc runs its containers, iptables is what the
# kubelet writes its chains with, and nftables is what kube-proxy's nftables mode drives.
packages=()
if wants node; then
  command -v runc >/dev/null 2>&1 || packages+=(runc)
  command -v iptables >/dev/null 2>&1 || packages+=(iptables)
  command -v nft >/dev/null 2>&1 || packages+=(nftables)
fi
# Karpenter is built with tools/karpenter/replay-timers.patch applied.
if wants karpenter; then
  command -v patch >/dev/null 2>&1 || packages+=(patch)
fi
if (( ${#packages[@]} )); then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "tools: the real node needs the Debian packages ${packages[*]}; install them (as root)" >&2
    exit 1
  fi
  echo "tools: installing Debian packages ${packages[*]} for the real kubelet node"
  apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      -o Dpkg::Options::=--force-confold "${packages[@]}" >/dev/null
  }
  # A new machine may have no package lists yet.
  apt_install || { apt-get update -qq && apt_install; }
fi

need_go="1.26"
if ! command -v go >/dev/null 2>&1; then
  echo "tools: 'go' was not found. Install Go >= $need_go (https://go.dev/dl/) and put it on PATH," >&2
  echo "       or set SCHEDPOLICY_TOOLS_BIN to a directory with prebuilt binaries: ${names[*]}" >&2
  exit 1
fi
have_go=$(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')
if [[ "$(printf '%s\n%s\n' "$need_go" "$have_go" | sort -V | awk 'NR == 1')" != "$need_go" ]]; then
  echo "tools: Go $have_go is too old; install Go >= $need_go (https://go.dev/dl/)." >&2
  exit 1
fi

out=$BIN
# readonly: a build must use exactly the committed go.mod and go.sum, never rewrite them.
export CGO_ENABLED=0 GOFLAGS=-mod=readonly

# Version of a module as pinned in a tools module's go.mod.
pinned() { (cd "$here/$1" && go list -m -f '{{.Version}}' "$2"); }

# stamp DIR PACKAGE LDFLAGS: what a binary was built from; a different one means rebuild.
stamp() { echo "$2 $(sha256sum "$here/$1/go.sum" | cut -c1-16) $3"; }

# current NAME STAMP: $out/NAME exists and was built from STAMP.
current() {
  [[ -x "$out/$1" && -f "$out/.stamps/$1" && "$(cat "$out/.stamps/$1")" == "$2" ]]
}

# go_build WHAT DIR OUTPUT LDFLAGS PACKAGE...: `go build` in tools module DIR, saying every 30 s
# that WHAT is still building; exits the script on failure.
go_build() {
  local what=$1 dir=$2 output=$3 ldflags=$4 start=$SECONDS rc=0
  shift 4
  ( while sleep 30; do echo "tools:   ... still building $what, $((SECONDS - start))s elapsed"; done ) &
  local ticker=$!
  (cd "$here/$dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$output" "$@") || rc=$?
  kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
  if (( rc != 0 )); then
    rm -rf "$output"
    echo "tools: building $what failed (exit $rc)" >&2
    exit "$rc"
  fi
}

# build DIR NAME PACKAGE [LDFLAGS]: go build PACKAGE from tools module DIR into $out/NAME.
build() {
  local dir=$1 name=$2 pkg=$3 ldflags=${4:-} made start=$SECONDS
  made=$(stamp "$dir" "$pkg" "$ldflags")
  if current "$name" "$made"; then
    echo "tools: $name is up to date"
    return
  fi
  mkdir -p "$(dirname "$out/$name")" "$(dirname "$out/.stamps/$name")"
  echo "tools: building $name from $pkg (a cold build on 2 cores takes many minutes) ..."
  go_build "$name" "$dir" "$out/$name.tmp" "$ldflags" "$pkg"
  mv "$out/$name.tmp" "$out/$name"
  echo "$made" > "$out/.stamps/$name"
  echo "tools: built $name in $((SECONDS - start))s"
}

# build_kubernetes DIR LDFLAGS NAME...: k8s.io/kubernetes/cmd/NAME for each NAME, from tools
# module DIR into $out, in one `go build`: the binaries share most of their packages, and one
# build links each binary while it still compiles others, where separate builds would leave
# a core idle during every link.
build_kubernetes() {
  local dir=$1 ldflags=$2 name stale=() pkgs=() start=$SECONDS tmp
  shift 2
  for name in "$@"; do
    if current "$name" "$(stamp "$dir" "k8s.io/kubernetes/cmd/$name" "$ldflags")"; then
      echo "tools: $name is up to date"
    else
      stale+=("$name")
      pkgs+=("k8s.io/kubernetes/cmd/$name")
      echo "tools: building $name from k8s.io/kubernetes/cmd/$name ($(pinned "$dir" k8s.io/kubernetes))"
    fi
  done
  (( ${#stale[@]} )) || return 0
  mkdir -p "$out/.stamps"
  tmp=$(mktemp -d "$out/.build.XXXXXX")
  echo "tools:   (in one go build; a cold one on 2 cores takes several minutes)"
  go_build "${stale[*]}" "$dir" "$tmp/" "$ldflags" "${pkgs[@]}"
  for name in "${stale[@]}"; do
    mv "$tmp/$name" "$out/$name"
    stamp "$dir" "k8s.io/kubernetes/cmd/$name" "$ldflags" > "$out/.stamps/$name"
  done
  rmdir "$tmp"
  echo "tools: built ${stale[*]} in $((SECONDS - start))s"
}

# stamp_k8s MODULE_DIR: the ldflags that give a Kubernetes build its release version, as
# upstream's own build does (an unstamped one says v0.0.0-master).
stamp_k8s() {
  local version minor flags="" pkgpath
  version=$(pinned "$1" k8s.io/kubernetes)
  minor=$(echo "$version" | cut -d. -f2)
  for pkgpath in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkgpath.gitVersion=$version -X $pkgpath.gitMajor=1 -X $pkgpath.gitMinor=$minor"
    flags+=" -X $pkgpath.gitTreeState=clean"
  done
  echo "$flags"
}

# build_karpenter MODULE_DIR: Karpenter's KWOK provider from a patched copy of MODULE_DIR (the
# module cache's is read-only), through a copy of tools/karpenter/go.mod that replaces the
# module with that copy; the stamp covers the patch, so editing it rebuilds.
build_karpenter() {
  local module=$1 patch=$here/karpenter/replay-timers.patch src=$root/.tools/src/karpenter made
  made="$(stamp karpenter sigs.k8s.io/karpenter/kwok "") $(sha256sum "$patch" | cut -c1-16)"
  if current karpenter "$made"; then
    echo "tools: karpenter is up to date"
    return
  fi
  echo "tools: building karpenter from sigs.k8s.io/karpenter/kwok $(pinned karpenter sigs.k8s.io/karpenter) with $(basename "$patch")"
  rm -rf "$src" && mkdir -p "$src/build" "$out/.stamps"
  cp -r "$module" "$src/module" && chmod -R u+w "$src/module"
  patch --quiet --strip=1 --directory="$src/module" --input="$patch"
  { cat "$here/karpenter/go.mod"; echo; echo "replace sigs.k8s.io/karpenter => ../module"; } \
    > "$src/build/go.mod"
  cp "$here/karpenter/go.sum" "$src/build/go.sum"
  local start=$SECONDS
  go_build karpenter "../.tools/src/karpenter/build" "$out/karpenter.tmp" "" sigs.k8s.io/karpenter/kwok
  mv "$out/karpenter.tmp" "$out/karpenter"
  echo "$made" > "$out/.stamps/karpenter"
  echo "tools: built karpenter in $((SECONDS - start))s"
}

total=$SECONDS
if wants control-plane; then
  # etcd and kwok are modules of their own: built beside Kubernetes, they use the moments
  # its build leaves a core idle (module downloads, links).
  ( build etcd etcd go.etcd.io/etcd/server/v3 && build kwok kwok sigs.k8s.io/kwok/cmd/kwok ) &
  side=$!
  build_kubernetes kubernetes "$(stamp_k8s kubernetes)" \
    kube-apiserver kube-controller-manager kube-scheduler kubectl
  wait "$side" || exit 1
fi

if wants helm; then
  helm=$(pinned helm helm.sh/helm/v4)
  build helm helm helm.sh/helm/v4/cmd/helm "-X helm.sh/helm/v4/internal/version.version=$helm"
fi

if wants node; then
  build_kubernetes kubernetes "$(stamp_k8s kubernetes)" kubelet kube-proxy
  # containerd (runc itself comes from Debian), and the CNI plugins its bridge network uses.
  containerd=$(pinned containerd github.com/containerd/containerd/v2)
  for name in containerd containerd-shim-runc-v2 ctr; do
    build containerd "$name" "github.com/containerd/containerd/v2/cmd/$name" \
      "-X github.com/containerd/containerd/v2/version.Version=$containerd"
  done
  # In a directory of their own: the node's CNI bin dir holds plugins and nothing else.
  for plugin in main/bridge ipam/host-local main/loopback meta/portmap; do
    build cni "cni/${plugin#*/}" "github.com/containernetworking/plugins/plugins/$plugin"
  done
fi

if wants monitoring; then
  # Prometheus and its operator, which the in-cluster test runs as pods. Their release builds
  # set the version through prometheus/common's version package (.promu.yml, the operator's
  # Makefile). Prometheus 3.x.y is published as the Go module v0.3xx.y; it is built without
  # the web UI's assets (no builtinassets tag), which the API, the probes and the operator do
  # not need.
  prom_mod=$(pinned prometheus github.com/prometheus/prometheus)
  IFS=. read -r _ prom_minor prom_patch <<<"${prom_mod#v}"
  prom_version=$((prom_minor / 100)).$((prom_minor % 100)).$prom_patch
  # `go list -m` names no directory until the module is in the cache, as on a new machine.
  prom_dir=$(cd "$here/prometheus" && go mod download github.com/prometheus/prometheus &&
    go list -m -f '{{.Dir}}' github.com/prometheus/prometheus)
  if [[ "$(cat "$prom_dir/VERSION")" != "$prom_version" ]]; then
    echo "tools: prometheus $prom_mod says VERSION $(cat "$prom_dir/VERSION"), not $prom_version" >&2
    exit 1
  fi
  stampprom="-X github.com/prometheus/common/version.Version=$prom_version"
  stampprom+=" -X github.com/prometheus/common/version.Revision=$prom_mod"
  stampprom+=" -X github.com/prometheus/common/version.Branch=HEAD"
  for name in prometheus promtool; do
    build prometheus "$name" "github.com/prometheus/prometheus/cmd/$name" "$stampprom"
  done
  # The operator's default config-reloader image is tagged v<version.Version>.
  po_mod=$(pinned prometheus-operator github.com/prometheus-operator/prometheus-operator)
  stamppo="-X github.com/prometheus/common/version.Version=${po_mod#v}"
  stamppo+=" -X github.com/prometheus/common/version.Revision=$po_mod"
  stamppo+=" -X github.com/prometheus/common/version.Branch=HEAD"
  build prometheus-operator prometheus-operator \
    github.com/prometheus-operator/prometheus-operator/cmd/operator "$stamppo"
  build prometheus-operator prometheus-config-reloader \
    github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader "$stamppo"
fi

if wants karpenter; then
  # Only this group needs the newer Go; the go command fetches it from the module proxy.
  export GOTOOLCHAIN=go1.27.3
  karpenter=$(pinned karpenter sigs.k8s.io/karpenter)
  karpenter_dir=$(cd "$here/karpenter" && go mod download sigs.k8s.io/karpenter &&
    go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)
  # Built from a copy of the module with tools/karpenter/replay-timers.patch applied: it
  # divides a few of Karpenter's fixed timers (the disruption poll, command validation, the
  # nomination floor, the consolidation-state refresh, the PodDeletionCostManagement refresh,
  # the pod-event dedupe) by $KARPENTER_REPLAY_TIME_SCALE, so that a trace replayed N times
  # faster meets them on its own clock. Unset, the binary is Karpenter's own timing.
  build_karpenter "$karpenter_dir"
  # The CRDs of the very module the binary was built from: Karpenter's own and the KWOK
  # provider's node class.
  rm -rf "$out/karpenter-crds" && mkdir -p "$out/karpenter-crds"
  cp "$karpenter_dir"/pkg/apis/crds/karpenter.sh_*.yaml "$karpenter_dir"/kwok/apis/crds/*.yaml \
    "$out/karpenter-crds/"
  echo "$karpenter" > "$out/karpenter-crds/VERSION"
  unset GOTOOLCHAIN
fi

if wants compat; then
  # The oldest supported Kubernetes, for the compatibility lane: only the control plane (the
  # lane's nodes are KWOK's), in a directory of its own so it never shadows the target's.
  out=$COMPAT_BIN
  build_kubernetes kubernetes-1.35 "$(stamp_k8s kubernetes-1.35)" \
    kube-apiserver kube-controller-manager kube-scheduler kubectl
  out=$BIN
fi
echo "tools: ${groups[*]} ready in $BIN ($((SECONDS - total))s)"
