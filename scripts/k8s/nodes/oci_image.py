#!/usr/bin/env python3
"""Write a single-layer OCI image layout tar from a root file system directory, with no registry and no daemon.

Usage: ``oci_image.py ROOTFS OUT.tar NAME [--entrypoint ARG]... [--cmd ARG]... [--user USER] [--env K=V]...``

The layer is an uncompressed tar of ROOTFS (every entry owned by root, modification time 0, names sorted), so the
same ROOTFS always gives the same digests; ``ctr -n k8s.io images import OUT.tar`` imports it under NAME (the
``io.containerd.image.name`` annotation). Prints the manifest's digest, the one ``ctr images ls`` shows for NAME,
so a caller can tell whether the image it imported earlier is this one.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import tarfile
from pathlib import Path
from typing import Any

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def layer(rootfs: Path) -> bytes:
    """The tar of ``rootfs``'s tree (not ``rootfs`` itself), reproducible byte for byte."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for top, dirs, files in os.walk(rootfs):
            dirs.sort()
            for name in sorted(dirs + files):
                path = Path(top) / name
                info = tar.gettarinfo(str(path), arcname=str(path.relative_to(rootfs)))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isreg():
                    with path.open("rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def blob(blobs: dict[str, bytes], data: bytes) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"digest": digest, "size": len(data)}


def canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rootfs", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("name", help="the full image reference, e.g. dispatch.local/busybox:1.35.0")
    ap.add_argument("--entrypoint", action="append", default=[])
    ap.add_argument("--cmd", action="append", default=[])
    ap.add_argument("--user", default="")
    ap.add_argument("--env", action="append", default=[])
    args = ap.parse_args(argv)
    if not args.rootfs.is_dir():
        ap.error(f"{args.rootfs} is not a directory")

    blobs: dict[str, bytes] = {}
    tar = layer(args.rootfs)
    layer_desc = {"mediaType": "application/vnd.oci.image.layer.v1.tar", **blob(blobs, tar)}
    config: dict[str, Any] = {"Env": [f"PATH={PATH}", *args.env], "WorkingDir": "/"}
    if args.entrypoint:
        config["Entrypoint"] = args.entrypoint
    if args.cmd:
        config["Cmd"] = args.cmd
    if args.user:
        config["User"] = args.user
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [layer_desc["digest"]]},
    }
    config_desc = {"mediaType": "application/vnd.oci.image.config.v1+json", **blob(blobs, canonical(image_config))}
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_desc,
        "layers": [layer_desc],
    }
    manifest_desc = {"mediaType": "application/vnd.oci.image.manifest.v1+json", **blob(blobs, canonical(manifest))}
    tag = args.name.rsplit(":", 1)[1] if ":" in args.name.rsplit("/", 1)[-1] else "latest"
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                **manifest_desc,
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {"io.containerd.image.name": args.name, "org.opencontainers.image.ref.name": tag},
            }
        ],
    }

    files: list[tuple[str, bytes]] = [("oci-layout", canonical({"imageLayoutVersion": "1.0.0"}))]
    files += [(f"blobs/sha256/{d.removeprefix('sha256:')}", data) for d, data in sorted(blobs.items())]
    files.append(("index.json", canonical(index)))
    tmp = args.out.with_name(args.out.name + ".tmp")
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as out:
        for dirname in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(dirname)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            out.addfile(info)
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            out.addfile(info, io.BytesIO(data))
    tmp.replace(args.out)
    print(manifest_desc["digest"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
