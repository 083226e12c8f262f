# Copyright: gpufleet contributors
# Apache License 2.0
"""NVIDIA's XID catalogue as data, and the XIDs that fail the GPU gate by default.

Source: NVIDIA, "XID Errors", the page "Analyzing Xid Errors with the Xid Catalog" and its spreadsheet (sheet
"Catalog"), https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, driver branches R570 and R580,
codes 1-172, as published in October 2025. Each code has NVIDIA's mnemonic, its description and two resolution
buckets: the immediate action and the investigatory action, spelled as NVIDIA spells them (RESTART_APP, IGNORE,
RESET_GPU, RESTART_BM, RESTART_VM, CONTACT_SUPPORT, CHECK_MECHANICALS, CHECK_UVM, UPDATE_SWFW, WORKFLOW_...,
XID_154). No Python package ships this catalogue (DCGM, gpud and NVSentinel each keep their own copy in C++ or Go),
so it is written out here, one row per code.

The fatal set is derived from the catalogue, not picked by hand: an XID fails by default when its immediate action
is anything beyond restarting the application or ignoring the event (:data:`ACTIONS_THAT_PASS`); a code whose
action the catalogue leaves blank fails too (fail closed). Where gpufleet departs from that rule, the reason is
data as well: :data:`STRICTER` (63 and 94 fail although the catalogue's immediate action does not need a reset, the
row remap they announce takes effect only after one) and :data:`APPLICATION` (why 13, 31 and 43 pass).

Blackwell's NVLink XIDs 144-150 have a decode workflow as their action (WORKFLOW_NVLINK5_ERR); the driver prints
the workflow's outcome as a severity word on the line, ``149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (...)`` or
``145, RLW_REMAP Nonfatal XC0 i0 Link 02 (...)``. For those codes the word decides (:data:`SEVERITY_DECIDES`);
``Fatal`` on any XID line fails it.

An XID that is not in the catalogue is unknown: the gate fails it unless the pool's baseline names it in
``gpu.benign_xids`` with a reason. A pool may add XIDs (``gpu.fatal_xids_extra``) and may take a catalogue XID out
only through ``opt_out.xids`` with a reason; both reasons are printed and recorded.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Optional, Tuple

SOURCE = ("NVIDIA XID catalogue (docs.nvidia.com/deploy/xid-errors, 'Analyzing Xid Errors with the Xid Catalog'), "
          "driver branches R570 and R580, codes 1-172")
ACTIONS_THAT_PASS: Tuple[str, ...] = ("RESTART_APP", "IGNORE")


@dataclass(frozen=True)
class Xid:
    """One catalogue row: ``action`` is NVIDIA's immediate action, ``investigatory`` its investigatory action."""

    code: int
    mnemonic: str
    meaning: str
    action: str
    investigatory: str


# (code, mnemonic, description, immediate action, investigatory action), as in NVIDIA's catalogue.
_ROWS: Tuple[Tuple[int, str, str, str, str], ...] = (
    (1, "ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD", "Unused", "CONTACT_SUPPORT", ""),
    (2, "ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT", ""),
    (3, "ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD", "Unused", "CONTACT_SUPPORT", ""),
    (4, "ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY", "Unused", "CONTACT_SUPPORT", ""),
    (5, "ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW", "Unused", "CONTACT_SUPPORT", ""),
    (6, "ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR", "Unused", "CONTACT_SUPPORT", ""),
    (7, "ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR", "Unused", "CONTACT_SUPPORT", ""),
    (8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", "RESTART_APP", "CONTACT_SUPPORT"),
    (9, "ROBUST_CHANNEL_GR_ERROR_INSTANCE", "Unused", "CONTACT_SUPPORT", ""),
    (10, "ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP", "Unused", "CONTACT_SUPPORT", ""),
    (11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "Invalid or corrupted push buffer stream", "RESTART_APP",
     "CHECK_APP/CUDA"),
    (12, "ROBUST_CHANNEL_GR_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT", ""),
    (13, "ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY", "Graphics Engine Exception", "RESTART_APP",
     "WORKFLOW_XID_13"),
    (14, "ROBUST_CHANNEL_FAKE_ERROR", "Unused", "IGNORE", "CONTACT_SUPPORT"),
    (15, "ROBUST_CHANNEL_SCANLINE_TIMEOUT", "Unused", "CONTACT_SUPPORT", ""),
    (16, "ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT", "Unused", "CONTACT_SUPPORT", "CONTACT_SUPPORT"),
    (17, "ROBUST_CHANNEL_PARAMETER_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (18, "ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (19, "ROBUST_CHANNEL_DISP_MISSED_NOTIFIER", "Unused", "CONTACT_SUPPORT", ""),
    (20, "ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT", ""),
    (21, "ROBUST_CHANNEL_ME_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT", ""),
    (22, "ROBUST_CHANNEL_VP_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT", ""),
    (23, "ROBUST_CHANNEL_RC_LOGGING_ENABLED", "Unused", "CONTACT_SUPPORT", ""),
    (24, "ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT", "Unused", "CONTACT_SUPPORT", ""),
    (25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "Invalid or illegal push buffer stream", "RESTART_APP",
     "CHECK_APP/CUDA"),
    (26, "ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT", "Unused", "CONTACT_SUPPORT", ""),
    (27, "ROBUST_CHANNEL_VP_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (28, "ROBUST_CHANNEL_VP2_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (29, "ROBUST_CHANNEL_BSP_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (30, "ROBUST_CHANNEL_BAD_ADDR_ACCESS", "Unused", "CONTACT_SUPPORT", ""),
    (31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", "RESTART_APP", "WORKFLOW_XID_31"),
    (32, "ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream", "RESTART_APP", "CHECK_APP/CUDA"),
    (33, "ROBUST_CHANNEL_SEC_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (34, "ROBUST_CHANNEL_MSVLD_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (35, "ROBUST_CHANNEL_MSPDEC_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (36, "ROBUST_CHANNEL_MSPPP_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (37, "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "Driver firmware error", "IGNORE", "CHECK_APP/CUDA"),
    (38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error", "IGNORE", "CONTACT_SUPPORT"),
    (39, "ROBUST_CHANNEL_CE0_ERROR", "Copy Engine Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    (40, "ROBUST_CHANNEL_CE1_ERROR", "Copy Engine Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    (41, "ROBUST_CHANNEL_CE2_ERROR", "Copy Engine Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    (42, "ROBUST_CHANNEL_VIC_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing", "IGNORE", "CONTACT_SUPPORT"),
    (44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "Graphics Engine fault during context switch", "IGNORE",
     "CONTACT_SUPPORT"),
    (45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup, due to previous errors -- most likely to see "
     "when running multiple CUDA applications and hitting a DBE", "WORKFLOW_XID_45",
     "Solo: RESTART_FM; Not Solo: IGNORE (follow other Xid)"),
    (46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "RESET_GPU", "CONTACT_SUPPORT"),
    (47, "ROBUST_CHANNEL_NVENC0_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (48, "ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", "WORKFLOW_XID_48", "WORKFLOW_XID_48"),
    (49, "SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY", "Unused", "CONTACT_SUPPORT", ""),
    (50, "SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (51, "SILENT_RUNNING_STRESS_TEST_FAILURE", "Unused", "CONTACT_SUPPORT", ""),
    (52, "SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE", "Unused", "CONTACT_SUPPORT", ""),
    (53, "SILENT_RUNNING_TEMP_REDUCED_CLOCKING", "Unused", "CONTACT_SUPPORT", ""),
    (54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "Auxiliary power is not connected to the GPU board",
     "CHECK_MECHANICALS", "CONTACT_SUPPORT"),
    (55, "SILENT_RUNNING_TEMPERATURE_READ_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (56, "DISPLAY_CHANNEL_EXCEPTION", "Unused", "CONTACT_SUPPORT", ""),
    (57, "FB_LINK_TRAINING_FAILURE_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (58, "FB_MEMORY_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (59, "PMU_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (60, "ROBUST_CHANNEL_SEC2_ERROR", "Video processor exception", "RESTART_APP", "INVESTIGATE_SW"),
    (61, "PMU_BREAKPOINT", "Unused", "CONTACT_SUPPORT", ""),
    (62, "PMU_HALT_ERROR", "Internal micro-controller halt (newer drivers)", "RESET_GPU", "CONTACT_SUPPORT"),
    (63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", "IGNORE", "IGNORE"),
    (64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", "RESET_GPU", "CONTACT_SUPPORT"),
    (65, "ROBUST_CHANNEL_NVENC1_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (66, "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "Illegal access by driver", "IGNORE", "INVESTIGATE_SW"),
    (67, "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "Illegal access by driver", "IGNORE", "CONTACT_SUPPORT"),
    (68, "ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    (69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", "RESTART_APP", "CHECK_APP/CUDA"),
    (70, "ROBUST_CHANNEL_CE3_ERROR", "CE3: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (71, "ROBUST_CHANNEL_CE4_ERROR", "CE4: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (72, "ROBUST_CHANNEL_CE5_ERROR", "CE5: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (73, "ROBUST_CHANNEL_NVENC2_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (74, "NVLINK_ERROR", "NVLINK Error", "WORKFLOW_NVLINK_ERR", "CONTACT_SUPPORT"),
    (75, "ROBUST_CHANNEL_CE6_ERROR", "CE6: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (76, "ROBUST_CHANNEL_CE7_ERROR", "CE7: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (77, "ROBUST_CHANNEL_CE8_ERROR", "CE8: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (78, "VGPU_START_ERROR", "vGPU Start Error", "UPDATE_SWFW", "UPDATE_SWFW"),
    (79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", "RESTART_BM", "CONTACT_SUPPORT"),
    (80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", "Corrupted data sent to GPU", "RESTART_APP", "CHECK_APP/CUDA"),
    (81, "ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (82, "ROBUST_CHANNEL_NVJPG0_ERROR", "NVJPG0 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (83, "ROBUST_CHANNEL_NVDEC1_ERROR", "NVDEC1 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (84, "ROBUST_CHANNEL_NVDEC2_ERROR", "NVDEC2 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (85, "ROBUST_CHANNEL_CE9_ERROR", "CE9: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (86, "ROBUST_CHANNEL_OFA0_ERROR", "OFA Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    (87, "NVTELEMETRY_DRIVER_REPORT", "Unused", "CONTACT_SUPPORT", ""),
    (88, "ROBUST_CHANNEL_NVDEC3_ERROR", "NVDEC3 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (89, "ROBUST_CHANNEL_NVDEC4_ERROR", "NVDEC4 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (90, "LTC_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (91, "RESERVED_XID", "Unused", "CONTACT_SUPPORT", ""),
    (92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", "IGNORE", "CONTACT_SUPPORT"),
    (93, "INFOROM_ERASE_LIMIT_EXCEEDED", "Non-fatal violation of provisioned InfoROM wear limit", "IGNORE",
     "CONTACT_SUPPORT"),
    (94, "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error", "RESTART_APP", "IGNORE (sympathetic)"),
    (95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error", "RESET_GPU", "IGNORE (sympathetic)"),
    (96, "ROBUST_CHANNEL_NVDEC5_ERROR", "NVDEC5 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (97, "ROBUST_CHANNEL_NVDEC6_ERROR", "NVDEC6 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (98, "ROBUST_CHANNEL_NVDEC7_ERROR", "NVDEC7 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (99, "ROBUST_CHANNEL_NVJPG1_ERROR", "NVJPG1 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (100, "ROBUST_CHANNEL_NVJPG2_ERROR", "NVJPG2 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (101, "ROBUST_CHANNEL_NVJPG3_ERROR", "NVJPG3 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (102, "ROBUST_CHANNEL_NVJPG4_ERROR", "NVJPG4 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (103, "ROBUST_CHANNEL_NVJPG5_ERROR", "NVJPG5 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (104, "ROBUST_CHANNEL_NVJPG6_ERROR", "NVJPG6 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (105, "ROBUST_CHANNEL_NVJPG7_ERROR", "NVJPG7 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (106, "SMBPBI_TEST_MESSAGE", "SMBPBI Test Message", "IGNORE", "IGNORE"),
    (107, "SMBPBI_TEST_MESSAGE_SILENT", "SMBPBI Test Message Silent", "IGNORE", "IGNORE"),
    (108, "NVLINK_REMOTE_TRANSLATION_ERROR", "Unused", "IGNORE", "XID_137_FLOW"),
    (109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context Switch Timeout Error", "RESET_GPU", "CONTACT_SUPPORT"),
    (110, "SEC_FAULT_ERROR", "Security Fault Error", "RESET_GPU", "INVESTIGATE_SW"),
    (111, "BUNDLE_ERROR_EVENT", "Unused", "CONTACT_SUPPORT", ""),
    (112, "DISP_SUPERVISOR_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (113, "DP_LT_FAILURE", "Unused", "CONTACT_SUPPORT", ""),
    (114, "HEAD_RG_UNDERFLOW", "Unused", "CONTACT_SUPPORT", ""),
    (115, "CORE_CHANNEL_REGS", "Unused", "CONTACT_SUPPORT", ""),
    (116, "WINDOW_CHANNEL_REGS", "Unused", "CONTACT_SUPPORT", ""),
    (117, "CURSOR_CHANNEL_REGS", "Unused", "CONTACT_SUPPORT", ""),
    (118, "HEAD_REGS", "Unused", "CONTACT_SUPPORT", ""),
    (119, "GSP_RPC_TIMEOUT", "GSP RPC Timeout", "RESET_GPU", "INVESTIGATE_SW"),
    (120, "GSP_ERROR", "GSP Error", "RESET_GPU", "INVESTIGATE_SW"),
    (121, "C2C_ERROR", "C2C Error", "IGNORE", "CONTACT_SUPPORT"),
    (122, "SPI_PMU_RPC_READ_FAIL", "Unused", "CONTACT_SUPPORT", ""),
    (123, "SPI_PMU_RPC_WRITE_FAIL", "Unused", "CONTACT_SUPPORT", ""),
    (124, "SPI_PMU_RPC_ERASE_FAIL", "Unused", "CONTACT_SUPPORT", ""),
    (125, "INFOROM_FS_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (126, "ROBUST_CHANNEL_CE10_ERROR", "CE10: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (127, "ROBUST_CHANNEL_CE11_ERROR", "CE11: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (128, "ROBUST_CHANNEL_CE12_ERROR", "CE12: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (129, "ROBUST_CHANNEL_CE13_ERROR", "CE13: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (130, "ROBUST_CHANNEL_CE14_ERROR", "CE14: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (131, "ROBUST_CHANNEL_CE15_ERROR", "CE15: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (132, "ROBUST_CHANNEL_CE16_ERROR", "CE16: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (133, "ROBUST_CHANNEL_CE17_ERROR", "CE17: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (134, "ROBUST_CHANNEL_CE18_ERROR", "CE18: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (135, "ROBUST_CHANNEL_CE19_ERROR", "CE19: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (136, "ALI_TRAINING_FAIL", "Link Training Failed", "RESET_GPU", "INVESTIGATE_LINK_SI"),
    (137, "NVLINK_PRIV_ERR", "NVLink Privilege Error", "IGNORE", "XID_137_FLOW"),
    (138, "ROBUST_CHANNEL_DLA_ERROR", "Unused", "CONTACT_SUPPORT", ""),
    (139, "ROBUST_CHANNEL_OFA1_ERROR", "OFA1 Error", "RESTART_APP", "CONTACT_SUPPORT"),
    (140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", "RESET_GPU", "CONTACT_SUPPORT"),
    (141, "ROBUST_CHANNEL_FAST_PATH_ERROR", "CUDA Fast Path Error", "IGNORE", "CONTACT_SUPPORT"),
    (142, "ROBUST_CHANNEL_NVENC3_ERROR", "NVENC3 Error", "CONTACT_SUPPORT", ""),
    (143, "GPU_INIT_ERROR", "GPU Initialization Error", "RESET_GPU", "CONTACT_SUPPORT"),
    (144, "NVLINK_SAW_ERROR", "NVLINK: SAW Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    (145, "NVLINK_RLW_ERROR", "NVLINK: RLW Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    (146, "NVLINK_TLW_ERROR", "NVLINK: TLW Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    (147, "NVLINK_TREX_ERROR", "NVLINK: TREX Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    (148, "NVLINK_NVLPW_CTRL_ERROR", "NVLINK: NVLPW_CTRL Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    (149, "NVLINK_NETIR_ERROR", "NVLINK: NETIR Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    (150, "NVLINK_MSE_ERROR", "NVLINK: MSE Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    (151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "Key rotation Error", "RESTART_VM", "CONTACT_SUPPORT"),
    (152, "ROBUST_CHANNEL_DLA_SMMU_ERROR", "DLA SMMU Error", "IGNORE", "CONTACT_SUPPORT"),
    (153, "ROBUST_CHANNEL_DLA_TIMEOUT", "DLA timeout Error", "IGNORE", "CONTACT_SUPPORT"),
    (154, "GPU_RECOVERY_ACTION_CHANGED", "GPU Recovery Action Changed", "XID_154",
     "N/A Informational only regarding another Xid"),
    (155, "NVLINK_SW_DEFINED_ERROR", "NVLINK: SW Defined Error", "RESET_GPU", "INVESTIGATE_SW_USER"),
    (156, "RESOURCE_RETIREMENT_EVENT", "Resource Retirement Event", "RESET_GPU", "IGNORE"),
    (157, "RESOURCE_RETIREMENT_FAILURE", "Resource Retirement Failure", "IGNORE", "CONTACT_SUPPORT"),
    (158, "GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", "RESET_GPU", "CONTACT_SUPPORT"),
    (159, "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHI Non-Data Error", "CHECK_UVM", "SYMPATHETIC_REPORT_SOLO"),
    (160, "CHANNEL_RETIREMENT_EVENT", "Channel Retirement Event", "IGNORE", "INVESTIGATE_SW"),
    (161, "CHANNEL_RETIREMENT_FAILURE", "Channel Retirement Failure", "IGNORE", "INVESTIGATE_SW"),
    (162, "PSHC_REENGAGED", "Power Smoothing HW Circuitry capability reengaged", "", ""),
    (163, "PSHC_DISENGAGED", "Power Smoothing HW Circuitry capability disengaged", "", ""),
    (164, "PSHC_LOW_LIFETIME", "Power Smoothing HW Circuitry low lifetime reached", "", ""),
    (165, "PSHC_ZERO_LIFETIME", "Power Smoothing HW Circuitry lifetime exhausted", "", ""),
    (166, "NVLINK_SECURE_CRYPTO_ERR", "CC traffic seen prior to link properly being configured for encrypted "
     "traffic", "", ""),
    (167, "PCIE_FATAL_TIMEOUT", "PCIe fatal timeout", "", ""),
    (168, "REDUCED_GPU_MEMORY_CAPACITY", "Errors found in WPR (write protected region)", "", ""),
    (169, "SEC2_HALT_ERROR", "Internal micro-controller halt", "", ""),
    (170, "NVLINK_SECURE_OTHER", "Interrupt seen in CC mode", "", ""),
    (171, "UNCORRECTABLE_DRAM_ERROR", "Uncorrectable DRAM error (details Xid 48: DRAM or SRAM)", "", ""),
    (172, "UNCORRECTABLE_SRAM_ERROR", "Uncorrectable SRAM error (details Xid 48: DRAM or SRAM)", "", ""),
)
CATALOGUE: Dict[int, Xid] = {row[0]: Xid(*row) for row in _ROWS}
LAST_CODE = max(CATALOGUE)

# Where gpufleet fails an XID whose immediate action alone would not: the reason, kept with the data.
STRICTER: Dict[int, str] = {
    63: "the row remap (or page retirement) it records takes effect only after a GPU reset or reboot; a node is "
        "not handed back with a remap pending",
    94: "the application that hit the contained error must restart, and the row remap that follows takes effect "
        "only after a GPU reset or reboot; until then the node may offer fewer GPUs (NVIDIA's memory error "
        "management guide)",
}
# Why the application faults pass: the catalogue's immediate action is RESTART_APP or IGNORE, and a gate on them
# would fail nodes for a user's bug. The GPU's own faults that cause them are caught by XIDs 48, 63, 64, 94, 95.
APPLICATION: Dict[int, str] = {
    13: "graphics engine exception: usually the application (an out-of-range address, an illegal instruction)",
    31: "GPU memory page fault: usually the application (an illegal memory access)",
    43: "GPU stopped processing: the channel of an application that faulted was stopped",
}
# XIDs whose line carries the driver's severity word (Fatal / Nonfatal) as the decode workflow's outcome.
SEVERITY_DECIDES: FrozenSet[int] = frozenset(c for c, x in CATALOGUE.items() if x.action == "WORKFLOW_NVLINK5_ERR")


# XIDs judged by the XID that caused them (NVIDIA's investigatory action for 45: "Not Solo: IGNORE (follow other
# Xid)"): the driver names the cause on the line ("caused by previous Xid 149"), and that XID's verdict is the
# line's. Alone, 45 is what the driver logs when it tears down an application that was stopped - Control-C, a
# SIGKILL, a GPU reset - which a drain does to every GPU pod it evicts; it passes, with that reason recorded.
FOLLOWS: Dict[int, str] = {
    45: "alone, logged when the driver tears down an application that was stopped (Control-C, SIGKILL, a GPU "
        "reset), as a drain stops GPU pods; with 'caused by previous Xid N' the cause decides",
}


def _fatal(xid: Xid) -> bool:
    return xid.code in STRICTER or (xid.action not in ACTIONS_THAT_PASS and xid.code not in FOLLOWS)


FATAL_XIDS: Dict[int, str] = {code: xid.meaning for code, xid in CATALOGUE.items() if _fatal(xid)}
PASSING_XIDS: Dict[int, str] = {code: xid.meaning for code, xid in CATALOGUE.items() if not _fatal(xid)}


def entry(code: int) -> Optional[Xid]:
    """The catalogue row of ``code``, or None when NVIDIA's catalogue does not have it."""
    return CATALOGUE.get(code)


def meaning(code: int) -> str:
    """NVIDIA's description and mnemonic of ``code``, or that the catalogue does not have it."""
    xid = CATALOGUE.get(code)
    if xid is None:
        return "not in NVIDIA's XID catalogue (codes 1-%d, driver branches R570/R580)" % LAST_CODE
    return "%s, %s" % (xid.meaning, xid.mnemonic)


def action(code: int) -> str:
    """NVIDIA's immediate action for ``code`` ("" when unknown or not given)."""
    xid = CATALOGUE.get(code)
    return xid.action if xid else ""
