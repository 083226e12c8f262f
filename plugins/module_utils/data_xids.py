# Copyright: gpufleet contributors
# Apache License 2.0
"""XIDs that fail the GPU gate by default: the GPU needs a reset, a reboot, a row remap or replacement.

Source: NVIDIA's XID catalogue ("XID Errors", NVIDIA GPU driver documentation, R570/R580 server branches,
https://docs.nvidia.com/deploy/xid-errors/). A pool baseline may add XIDs (``gpu.fatal_xids_extra``) and may take
one out only through ``opt_out.xids`` with a reason, which is printed and recorded.

Not on the list: 13, 31, 43 (graphics exception, memory page fault, GPU stopped processing) - usually the
application's fault, not the node's; a gate on them would fail nodes for a user's bug.
"""
from __future__ import annotations

from typing import Dict

SOURCE = "NVIDIA XID catalogue (docs.nvidia.com/deploy/xid-errors), driver branches R570 and R580"
FATAL_XIDS: Dict[int, str] = {
    48: "double-bit ECC error",
    63: "ECC page retirement or row remap recorded",
    64: "ECC page retirement or row remap failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    94: "contained ECC error (reset needed; the node may report fewer GPUs until then)",
    95: "uncontained ECC error",
    119: "GSP RPC timeout (reset the GPU)",
    120: "GSP error (reset the GPU)",
    154: "GPU recovery action changed (reset or reboot required)",
}
OTHER_XIDS: Dict[int, str] = {
    13: "graphics engine exception (usually the application)",
    31: "GPU memory page fault (usually the application)",
    43: "GPU stopped processing (usually the application)",
}


def meaning(xid: int) -> str:
    return FATAL_XIDS.get(xid) or OTHER_XIDS.get(xid) or "see the NVIDIA XID catalogue"
