"""`python -m redlockd ARGS`: runs the installed redlockd binary with ARGS."""

import os
import subprocess
import sys

from ._find import find_redlockd_bin


def main() -> None:
    binary = find_redlockd_bin()
    if os.name == "nt":
        sys.exit(subprocess.call([binary, *sys.argv[1:]]))
    os.execv(binary, [binary, *sys.argv[1:]])


if __name__ == "__main__":
    main()
