"""Turns `runc spec`'s default config into the way the chart runs a container.

`python3 runc_spec.py CONFIG ROOTFS UID ARGS...`: a read-only root, a non-root user, and a
tmpfs on /tmp, the only place the chart's pods may write. Used by tools/image.sh.
"""

from __future__ import annotations

import json
import sys


def main(path: str, rootfs: str, uid: str, *args: str) -> None:
    with open(path) as f:
        spec = json.load(f)
    spec["root"] = {"path": rootfs, "readonly": True}
    spec["process"].update(
        terminal=False,
        user={"uid": int(uid), "gid": int(uid)},
        env=["PATH=/opt/schedpolicy/bin:/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "TMPDIR=/tmp"],
        args=list(args),
    )
    spec["mounts"].append(
        {
            "destination": "/tmp",
            "type": "tmpfs",
            "source": "tmpfs",
            "options": ["nosuid", "nodev", "mode=1777"],
        }
    )
    with open(path, "w") as f:
        json.dump(spec, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
