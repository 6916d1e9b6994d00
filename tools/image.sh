#!/usr/bin/env bash
# Builds the operator's image from the project's Dockerfile, with no daemon and no registry.
#
# Users pull the Dockerfile's default base (the official python image). No registry is
# reachable here, so the base is made locally from Debian bookworm packages (mmdebstrap:
# python3.11 and its venv module) and handed to the Dockerfile through its PYTHON_IMAGE
# build argument. buildah reads the Dockerfile; its storage lives in .tools/buildah, and the
# image is written as a docker-archive to .tools/images, which `ctr images import` reads.
# Then the image is run once with runc as the chart runs it: read-only root, UID 65532.
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
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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

# A TLS-inspecting proxy may sit between this machine and PyPI: pip in the build trusts what
# the host trusts. The mounts exist only while RUN steps run; nothing of them is in the image.
mounts=()
for f in /etc/ssl/certs/ca-certificates.crt /etc/pip.conf; do
  [[ -f $f ]] && mounts+=(-v "$f:$f:ro")
done
echo "image: building $image_ref from the Dockerfile"
# --network host: buildah's default network for RUN steps would make a bridge and turn on
# IP forwarding on this machine.
"${B[@]}" bud --quiet --pull=never --network host --layers "${mounts[@]}" \
  --build-arg PYTHON_IMAGE="$base_ref" -t "$image_ref" -f "$root/Dockerfile" "$root" >/dev/null
archive=$out/schedpolicy-operator.tar
rm -f "$archive"
"${B[@]}" push -q "$image_ref" "docker-archive:$archive:$image_ref" >/dev/null

# Run it once as the chart runs it: read-only root, UID 65532, only /tmp writable.
bundle=$(mktemp -d)
c=$("${B[@]}" from --pull-never "$image_ref")
cleanup() {
  rm -rf "$bundle"
  "${B[@]}" umount "$c" >/dev/null 2>&1 || true
  "${B[@]}" rm "$c" >/dev/null 2>&1 || true
}
trap cleanup EXIT
rootfs=$("${B[@]}" mount "$c")
(cd "$bundle" && runc spec)
python3 - "$bundle/config.json" "$rootfs" <<'EOF'
import json, sys
path, rootfs = sys.argv[1], sys.argv[2]
spec = json.load(open(path))
spec["root"] = {"path": rootfs, "readonly": True}
spec["process"].update(
    terminal=False,
    user={"uid": 65532, "gid": 65532},
    env=["PATH=/opt/schedpolicy/bin:/usr/bin:/bin", "HOME=/tmp", "TMPDIR=/tmp"],
    args=["sh", "-c", "schedpolicy --version && touch /tmp/ok && ! touch /opt/x 2>/dev/null"],
)
spec["mounts"].append(
    {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]}
)
json.dump(spec, open(path, "w"))
EOF
if ! got=$(runc run --bundle "$bundle" "schedpolicy-image-check-$$" 2>&1); then
  echo "image: the image did not run as the chart runs it: $got" >&2
  exit 1
fi
echo "image: $image_ref runs read-only as 65532 ($got); archive $archive ($(du -h "$archive" | cut -f1))"
