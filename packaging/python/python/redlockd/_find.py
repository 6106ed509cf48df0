"""Where the redlockd binary is: the one this package installed, unless told otherwise."""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path


class RedlockdNotFound(FileNotFoundError):
    """No redlockd binary where the package puts it, and none named."""


def _exe() -> str:
    return "redlockd" + (sysconfig.get_config_var("EXE") or "")


def _candidates() -> list[Path]:
    exe = _exe()
    dirs: list[str] = []
    # The environment this interpreter runs in (a venv's bin/), then its base.
    dirs.append(sysconfig.get_path("scripts"))
    dirs.append(sysconfig.get_path("scripts", vars={"base": sys.base_prefix}))
    # `pip install --prefix P`: the package is P/lib/pythonX.Y/site-packages/redlockd.
    here = Path(__file__).resolve().parent
    site = here.parent
    if site.name == "site-packages" and site.parent.name.startswith("python"):
        dirs.append(str(site.parent.parent.parent / "bin"))
    elif site.name == "site-packages" and site.parent.name == "Lib":
        dirs.append(str(site.parent.parent / "Scripts"))
    # `pip install --target T`: T/bin beside the package.
    dirs.append(str(site / "bin"))
    # `pip install --user`.
    user_scheme = "nt_user" if os.name == "nt" else "posix_user"
    try:
        dirs.append(sysconfig.get_path("scripts", scheme=user_scheme))
    except KeyError:
        pass
    seen: list[Path] = []
    for d in dirs:
        p = Path(d) / exe
        if p not in seen:
            seen.append(p)
    return seen


def find_redlockd_bin(explicit: str | os.PathLike[str] | None = None) -> str:
    """The binary to run: `explicit`, else $REDLOCKD_BIN, else the installed one."""
    for given, what in ((explicit, "the binary given"), (os.environ.get("REDLOCKD_BIN"), "REDLOCKD_BIN")):
        if given:
            p = Path(given)
            if not (p.is_file() and os.access(p, os.X_OK)):
                raise RedlockdNotFound(f"{what} ({p}) is not an executable file")
            return str(p)
    tried = _candidates()
    for p in tried:
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    raise RedlockdNotFound(
        "the redlockd binary is not installed beside this package; looked in: "
        + ", ".join(str(p) for p in tried)
        + ". Reinstall the wheel for this platform, or set REDLOCKD_BIN to a redlockd binary."
    )
