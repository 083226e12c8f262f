"""The lab's journalctl (SIMULATION, lab/simulators/journalctl) prints its NVRM lines in the layout real drivers
print them: each simulated line is compared with the real captures of tests/fixtures/nvidia_smi (README.md names
their sources), by patterns written from those captures and by token-for-token equality once the GPU address is
swapped - not by the gate's own parser, so a parser that read a wrong layout could not hide a wrong simulator."""
from __future__ import annotations

import re

import pytest

from tests.unit.lab.simulators import Simulators
from tests.conftest import fixture_text


# Written from the captures (kern-real-xid79-dmesg.log, kern-real-xid79-no-pid.log, kern-xid79 lines of the issue
# threads): an XID 79 message, the GPU-at line before it and the fallen-off line after it, and the load line.
XID79 = re.compile(r"^NVRM: Xid \(PCI:[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\): 79, (pid='<unknown>', name=<unknown>, )?"
                   r"GPU has fallen off the bus\.$")
GPU_AT = re.compile(r"^NVRM: GPU at PCI:[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}: "
                    r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
FALLEN = re.compile(r"^NVRM: GPU [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]: GPU has fallen off the bus\.$")
LOADING = re.compile(r"^NVRM: loading NVIDIA UNIX x86_64 Kernel Module  [0-9]{3}\.[0-9]{1,3}(\.[0-9]{1,3})?  "
                     r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} UTC [0-9]{4}$")
# journalctl -o short-precise (journalctl(1)): "Mon DD HH:MM:SS.micros HOST IDENT: MESSAGE" (no capture of it found)
SHORT_PRECISE = re.compile(r"^[A-Z][a-z]{2} [0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6} [a-z0-9-]+ kernel: ")
# the prefixes of the captures: dmesg -T "[Fri Apr  5 21:29:39 2024] ", dmesg "[ 1843.308145] ", journalctl -k
# trimmed to "kernel: ", or none
CAPTURE_PREFIX = re.compile(r"^(\[[^\]]*\] |kernel: |[A-Z][a-z]{2} [ 0-9][0-9] [0-9:]{8} \S+ kernel: (\[[^\]]*\] )?)?")


def messages(text):
    """The NVRM messages of a log, prefixes (journalctl, dmesg, syslog) cut off."""
    out = []
    for line in text.splitlines():
        start = line.find("NVRM: ")
        if start >= 0:
            out.append(line[start:].rstrip())
    return out


CAPTURED = messages(fixture_text("nvidia_smi", "kern-real-xid79-dmesg.log") +
                    fixture_text("nvidia_smi", "kern-real-xid79-no-pid.log") +
                    fixture_text("nvidia_smi", "kern-real-xid43-31-94-dmesg.log"))


@pytest.fixture
def journalctl(tmp_path):
    sims = Simulators(tmp_path, {"nvidia-driver": "570.172.08"}, {"gpus": 8, "faults": {}, "boot_time": 1764489600})

    def run(*faults):
        sims.write_state(faults)
        return sims.run("journalctl", "-k").stdout

    return run


def test_the_patterns_are_the_captures():
    """Each pattern matches the real lines it was written from (so a pattern cannot drift from them)."""
    assert [m for m in CAPTURED if m.startswith("NVRM: Xid") and ": 79, " in m] and all(
        XID79.match(m) for m in CAPTURED if m.startswith("NVRM: Xid") and ": 79, " in m)
    assert [m for m in CAPTURED if GPU_AT.match(m)] == [
        "NVRM: GPU at PCI:0000:a1:00: GPU-979426f2-893a-7cbb-c4cf-81472f89a462",
        "NVRM: GPU at PCI:0000:06:00: GPU-0b6b7808-c002-f593-ac86-cd8e57757b94",
        "NVRM: GPU at PCI:0000:00:05: GPU-efbdfde9-5798-a6e7-4c46-12518fa15375",
        "NVRM: GPU at PCI:0000:00:07: GPU-3b6ec030-5adc-1847-e155-79f635584b4e",
        "NVRM: GPU at PCI:0000:00:08: GPU-c24840ec-8de1-83d5-b126-08000173ae32"]
    assert [m for m in CAPTURED if FALLEN.match(m)] == ["NVRM: GPU 0000:a1:00.0: GPU has fallen off the bus.",
                                                         "NVRM: GPU 0000:06:00.0: GPU has fallen off the bus."]
    assert len([m for m in CAPTURED if LOADING.match(m)]) == 2
    for name in ("kern-real-xid79-dmesg.log", "kern-real-xid43-31-94-dmesg.log", "kern-real-xid45-after-nvlink.log",
                 "kern-real-xid48-64-rminitadapter-syslog.log", "kern-real-xid79-no-pid.log"):
        for line in fixture_text("nvidia_smi", name).splitlines():
            if "NVRM: " in line and not line.startswith(" "):
                assert line[len(CAPTURE_PREFIX.match(line).group(0)):].startswith("NVRM: "), line


def test_a_clean_boot_prints_only_the_load_line(journalctl):
    out = journalctl()
    assert messages(out) == ["NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.172.08  Tue Jul  8 18:35:42 UTC "
                             "2025"]
    assert all(LOADING.match(m) for m in messages(out))
    assert all(SHORT_PRECISE.match(line) for line in out.splitlines())


def test_xid79_lines_have_the_real_layout(journalctl):
    out = journalctl("xid79")
    assert all(SHORT_PRECISE.match(line) for line in out.splitlines())
    simulated = messages(out)[1:]
    assert len(simulated) == 3
    assert GPU_AT.match(simulated[0]) and XID79.match(simulated[1]) and FALLEN.match(simulated[2])
    # token for token the real trio of akash-network/support#209, its GPU (0000:a1:00) swapped for the lab's
    real = [m for m in messages(fixture_text("nvidia_smi", "kern-real-xid79-dmesg.log"))
            if GPU_AT.match(m) or XID79.match(m) or FALLEN.match(m)]
    swapped = [m.replace("0000:9a:00", "0000:a1:00") for m in simulated]
    assert swapped[1:] == real[1:]
    assert swapped[0].split(" GPU-")[0] == real[0].split(" GPU-")[0]
    assert [len(part) for part in swapped[0].split(" GPU-")[1].split("-")] == \
        [len(part) for part in real[0].split(" GPU-")[1].split("-")]


def test_the_gate_reads_the_simulated_loss_once(journalctl):
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.gpu_health import scan_kernel_log
    log = scan_kernel_log(journalctl("xid79"))
    assert [(e["xid"], e["pci"], e["gpu"]) for e in log["events"]] == [(79, "PCI:0000:9a:00", "0000:9a:00")]
    assert [(a["kind"], a["gpu"]) for a in log["adapter"]] == [("fell off the bus", "0000:9a:00")]
