#!/usr/bin/env bash
# Builds the chart's images with no daemon and no registry: the operator's from the project's
# Dockerfile, the upstream kube-scheduler's from the binary `make tools` builds, and the pause
# image a kubelet needs from upstream's pause.c.
#
# Users pull the Dockerfile's default base (the official python image). No registry is
# reachable here, so the base is made locally from Debian bookworm packages (mmdebstrap:
# python3.11 and its venv module) and handed to the Dockerfile through its PYTHON_IMAGE
# build argument. buildah reads the Dockerfile; its storage lives in .tools/buildah, and the
# images are written as docker-archives to .tools/images, which `ctr images import` reads.
# Then each image is run once with runc as the chart runs it: read-only root, not root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
out=$root/.tools/images
store=$root/.tools/buildah
mkdir -p "$out" "$store"

if [[ $(id -u) -ne 0 ]]; then
  echo "image: run as root (buildah and runc run rootful here)" >&2
  exit 1
fi
missing=()
for tool in buildah mmdebstrap runc; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if (( ${#missing[@]} )); then
  # buildah reads the Dockerfile without a daemon, mmdebstrap makes the Debian base, and
  # runc runs the result once as the chart would.
  echo "image: installing Debian packages ${missing[*]}: the image build needs them"
  apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  }
  # A new machine may have no package lists yet.
  apt_install || { apt-get update -qq && apt_install; }
fi

B=(buildah --root "$store/root" --runroot "$store/run" --storage-driver overlay)
packages=python3.11-venv,python-is-python3,ca-certificates
base_tar=$out/base-bookworm-$(echo "$packages" | sha256sum | cut -c1-12).tar
base_ref=localhost/schedpolicy-base/python:3.11-bookworm
version=$(sed -nE 's/^appVersion: "?([^"]*)"?$/\1/p' "$root/chart/Chart.yaml")
image_ref=ghcr.io/schedpolicy/schedpolicy-operator:$version

if [[ ! -s $base_tar ]]; then
  echo "image: making the Debian bookworm base (mmdebstrap: $packages)"
  mmdebstrap --quiet --variant=essential --mode=root --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$base_tar.partial" http://deb.debian.org/debian
  mv "$base_tar.partial" "$base_tar"
  "${B[@]}" rmi -f "$base_ref" >/dev/null 2>&1 || true
fi
if ! "${B[@]}" inspect --type image "$base_ref" >/dev/null 2>&1; then
  echo "image: importing the base as $base_ref"
  c=$("${B[@]}" from scratch)
  "${B[@]}" add "$c" "$base_tar" / >/dev/null
  "${B[@]}" config --cmd python3 --env LANG=C.UTF-8 "$c"
  "${B[@]}" commit -q "$c" "$base_ref" >/dev/null
  "${B[@]}" rm "$c" >/dev/null
fi


# Run an image once as the chart runs it: read-only root, not root, only /tmp writable. The
# operator's check also asks who it runs as, as kopf does at start-up.
# Prints what the command printed; fails when the command does.
runs_as_chart() {
  local ref=$1 uid=$2 bundle c rootfs got rc=0
  shift 2
  bundle=$(mktemp -d)
  c=$("${B[@]}" from --pull-never "$ref")
  rootfs=$("${B[@]}" mount "$c")
  (cd "$bundle" && runc spec)
  python3 "$here/runc_spec.py" "$bundle/config.json" "$rootfs" "$uid" "$@"
  got=$(runc run --bundle "$bundle" "schedpolicy-image-check-$$" 2>&1) || rc=$?
  rm -rf "$bundle"
  "${B[@]}" umount "$c" >/dev/null
  "${B[@]}" rm "$c" >/dev/null
  if (( rc != 0 )); then
    echo "image: $ref did not run as the chart runs it: $got" >&2
    return 1
  fi
  echo "$got"
}

# Write an image as a docker-archive, the form whose name `ctr images import` keeps.
export_archive() {
  local ref=$1 archive=$out/$2.tar
  rm -f "$archive"
  "${B[@]}" push -q "$ref" "docker-archive:$archive:$ref" >/dev/null
  echo "$archive ($(du -h "$archive" | cut -f1))"
}

# A TLS-inspecting proxy may sit between this machine and PyPI: pip in the build trusts what
# the host trusts. The mounts exist only while RUN steps run; nothing of them is in the image.
mounts=()
for f in /etc/ssl/certs/ca-certificates.crt /etc/pip.conf; do
  [[ -f $f ]] && mounts+=(-v "$f:$f:ro")
done
# --network host: buildah's default network for RUN steps would make a bridge and turn on
# IP forwarding on this machine.
bud=("${B[@]}" bud --quiet --pull=never --network host --layers)

echo "image: building $image_ref from the Dockerfile"
"${bud[@]}" "${mounts[@]}" --build-arg PYTHON_IMAGE="$base_ref" -t "$image_ref" \
  -f "$root/Dockerfile" "$root" >/dev/null
got=$(runs_as_chart "$image_ref" 65532 \
  sh -c "schedpolicy --version && python -c 'import getpass; getpass.getuser()' \
    && touch /tmp/ok && ! touch /opt/x 2>/dev/null")
echo "image: $image_ref runs read-only as 65532 ($got): $(export_archive "$image_ref" schedpolicy-operator)"

# An image of one static binary, FROM scratch, not run as root.
one_binary() {
  local ref=$1 binary=$2 path=$3 uid=$4 ctx=$out/context-$5
  mkdir -p "$ctx"
  cp "$binary" "$ctx/binary"
  printf 'FROM scratch\nCOPY binary %s\nUSER %s:%s\nENTRYPOINT ["%s"]\n' \
    "$path" "$uid" "$uid" "$path" >"$ctx/Containerfile"
  echo "image: building $ref from $binary"
  "${bud[@]}" -t "$ref" -f "$ctx/Containerfile" "$ctx" >/dev/null
}

# The chart's secondary scheduler is the upstream kube-scheduler, at the path its command names.
bin=${BIN:-$root/.tools/bin}
[[ -x $bin/kube-scheduler ]] || { echo "image: $bin/kube-scheduler is missing: run make tools" >&2; exit 1; }
scheduler_ref=registry.k8s.io/kube-scheduler:$("$bin/kube-scheduler" --version | awk '{print $2}')
one_binary "$scheduler_ref" "$bin/kube-scheduler" /usr/local/bin/kube-scheduler 65532 kube-scheduler
got=$(runs_as_chart "$scheduler_ref" 65532 /usr/local/bin/kube-scheduler --version)
echo "image: $scheduler_ref runs read-only as 65532 ($got): $(export_archive "$scheduler_ref" kube-scheduler)"

# The kubelet's sandbox image, from the pause.c of the Kubernetes module `make tools` builds.
pause_version=3.10.1
pause_ref=registry.k8s.io/pause:$pause_version
k8s_dir=$(cd "$here/kubernetes" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
mkdir -p "$out/build"
gcc -Os -Wall -Werror -static -DVERSION="v$pause_version" -o "$out/build/pause" \
  "$k8s_dir/build/pause/linux/pause.c"
one_binary "$pause_ref" "$out/build/pause" /pause 65535 pause
got=$(runs_as_chart "$pause_ref" 65535 /pause -v)
echo "image: $pause_ref runs read-only as 65535 ($got): $(export_archive "$pause_ref" pause)"

# Prometheus and its operator, for the in-cluster test, at the refs the operator asks for: the
# operator's Deployment (bundle.yaml) runs /bin/operator from its image's entrypoint, its default
# config reloader is prometheus-config-reloader:v<its version> run as /bin/prometheus-config-reloader,
# and it runs Prometheus from the image's entrypoint, /bin/prometheus, with spec.version as the
# tag. Upstream's images run as nobody (65534). The versions come from the binaries themselves.
for name in prometheus prometheus-operator prometheus-config-reloader; do
  [[ -x $bin/$name ]] || { echo "image: $bin/$name is missing: run make tools" >&2; exit 1; }
done
prom_ref=quay.io/prometheus/prometheus:v$("$bin/prometheus" --version | awk 'NR == 1 {print $3}')
po_version=v$("$bin/prometheus-operator" --short-version)
po_ref=quay.io/prometheus-operator/prometheus-operator:$po_version
reloader_ref=quay.io/prometheus-operator/prometheus-config-reloader:$po_version
one_binary "$prom_ref" "$bin/prometheus" /bin/prometheus 65534 prometheus
got=$(runs_as_chart "$prom_ref" 65534 /bin/prometheus --version | awk 'NR == 1')
echo "image: $prom_ref runs read-only as 65534 ($got): $(export_archive "$prom_ref" prometheus)"
one_binary "$po_ref" "$bin/prometheus-operator" /bin/operator 65534 prometheus-operator
got=$(runs_as_chart "$po_ref" 65534 /bin/operator --short-version)
echo "image: $po_ref runs read-only as 65534 ($got): $(export_archive "$po_ref" prometheus-operator)"
one_binary "$reloader_ref" "$bin/prometheus-config-reloader" /bin/prometheus-config-reloader 65534 \
  prometheus-config-reloader
got=$(runs_as_chart "$reloader_ref" 65534 /bin/prometheus-config-reloader --short-version)
echo "image: $reloader_ref runs read-only as 65534 ($got):" \
  "$(export_archive "$reloader_ref" prometheus-config-reloader)"
