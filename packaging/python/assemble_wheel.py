"""Assembles the redlockd wheel from a built binary (packaging/build.sh).

The metadata (dist-info: METADATA, entry points) is maturin's, from pyproject.toml;
the layout is the one maturin gives `bindings = "bin"`: the binary in
`redlockd-VERSION.data/scripts/` (pip puts it in the environment's bin/), the
pure-Python package beside it. The platform tag follows the binary: the newest glibc
symbol version it needs decides `manylinux_2_NN` (2.17 or older: manylinux2014).

    python assemble_wheel.py --dist-info DIR --binary PATH --python-src DIR --out DIR
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path


def glibc_tag(binary: Path) -> str:
    """The manylinux tag a Linux x86-64 binary can claim, from its glibc symbols."""
    out = subprocess.run(["objdump", "-T", str(binary)], check=True, capture_output=True, text=True).stdout
    versions = [tuple(map(int, m)) for m in re.findall(r"GLIBC_(\d+)\.(\d+)", out)]
    if not versions:
        raise SystemExit(f"{binary}: no glibc symbol versions found; not a glibc binary?")
    major, minor = max(versions)
    if major != 2:
        raise SystemExit(f"{binary}: needs GLIBC_{major}.{minor}?")
    if minor <= 17:
        return "manylinux2014_x86_64.manylinux_2_17_x86_64"
    return f"manylinux_2_{minor}_x86_64"


def record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dist-info", required=True, type=Path)
    ap.add_argument("--binary", required=True, type=Path)
    ap.add_argument("--python-src", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args()

    dist_info = a.dist_info
    m = re.fullmatch(r"(?P<name>[^-]+)-(?P<version>[^-]+)\.dist-info", dist_info.name)
    if not m:
        raise SystemExit(f"{dist_info}: not a NAME-VERSION.dist-info directory")
    name, version = m["name"], m["version"]
    tag = glibc_tag(a.binary)
    wheel_name = f"{name}-{version}-py3-none-{tag}.whl"

    files: list[tuple[str, bytes, int]] = []  # (arcname, data, mode)
    pkg_root = a.python_src
    for path in sorted(pkg_root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files.append((path.relative_to(pkg_root).as_posix(), path.read_bytes(), 0o644))
    files.append((f"{name}-{version}.data/scripts/redlockd", a.binary.read_bytes(), 0o755))
    for meta in ("METADATA", "entry_points.txt"):
        files.append((f"{dist_info.name}/{meta}", (dist_info / meta).read_bytes(), 0o644))
    wheel_meta = (dist_info / "WHEEL").read_text()
    wheel_meta = re.sub(r"(?m)^Tag: .*$", "Tag: " + "\nTag: ".join(
        f"py3-none-{t}" for t in tag.split(".")), wheel_meta)
    files.append((f"{dist_info.name}/WHEEL", wheel_meta.encode(), 0o644))

    record_name = f"{dist_info.name}/RECORD"
    record = "\n".join([record_line(n, d) for n, d, _ in files] + [f"{record_name},,", ""])
    files.append((record_name, record.encode(), 0o644))

    a.out.mkdir(parents=True, exist_ok=True)
    target = a.out / wheel_name
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for arcname, data, mode in files:
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    print(target)


if __name__ == "__main__":
    sys.exit(main())
