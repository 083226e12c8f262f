"""What the benchmarks share: the revision their figures were measured on."""
from __future__ import annotations

import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]


def revision() -> str:
    """``git describe --always --dirty`` of the checkout ("unknown" outside git)."""
    proc = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                          text=True, check=False)
    return proc.stdout.strip() or "unknown"
