"""The fleet report's HTML page in a real headless browser (Debian's chromium-headless-shell, installed by
lab/build/host-setup.sh): the page renders, its charts and table reach the DOM, and a screenshot is written to
out/fleet-report/fleet-report.png (printed, so it is in the test output). Without the browser the test is skipped,
except under CI, where a missing browser fails it."""
from __future__ import annotations

import os
import pathlib
import shutil
import struct
import subprocess
import zlib

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet_report import build_report, write_files
from tests.unit.module_utils.test_fleet_report import PATCHES, TODAY, example, readings

ROOT = pathlib.Path(__file__).resolve().parents[2]
BROWSERS = ("chromium-headless-shell", "chromium")
# As the machine notes say: no background networking (the sandbox refuses it), a fresh profile, no GPU.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name) or shutil.which(name, path="/usr/lib/chromium")
        if path:
            return path
    if os.environ.get("CI"):
        pytest.fail("no headless browser (%s); lab/build/host-setup.sh installs chromium-headless-shell" %
                    " or ".join(BROWSERS))
    pytest.skip("no headless browser: run lab/build/host-setup.sh (installs chromium-headless-shell)")


def png_pixels(path: pathlib.Path):
    """(width, height, distinct colours in a sample) of an 8-bit RGB/RGBA non-interlaced PNG, as Chromium writes."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    prev = bytearray(stride)
    colours = set()
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        kind, row = line[0], bytearray(line[1:])
        for i in range(stride):
            left = row[i - channels] if i >= channels else 0
            up, ul = prev[i], prev[i - channels] if i >= channels else 0
            if kind == 1:
                row[i] = (row[i] + left) & 255
            elif kind == 2:
                row[i] = (row[i] + up) & 255
            elif kind == 3:
                row[i] = (row[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - ul
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                row[i] = (row[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else ul)) & 255
        if y % 4 == 0:
            colours.update(bytes(row[x:x + 3]) for x in range(0, stride, channels * 4))
        prev = row
    return width, height, colours


def test_the_fleet_report_page_renders_in_a_headless_browser(tmp_path):
    exe = browser()
    report = build_report(example(), readings(canary_1={"control_plane": "v1.36.1", "kubelets": {"h100": ["v1.36.1"]}},
                                              train_b={"state": "upgrading"}), PATCHES, TODAY)
    out = ROOT / "out" / "fleet-report"
    page = pathlib.Path(write_files(str(out), report)["files"][2])
    profile = tmp_path / "profile"
    dom = subprocess.run([exe, *FLAGS, "--user-data-dir=%s" % profile, "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=False)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    for cell in ("canary-1", "inf-east", "inf-west", "train-a", "train-b"):
        assert "<td>%s</td>" % cell in html
    assert html.count("<rect") == len(report["version_spread"]) + sum(len(r["states"]) for r in report["rings"])
    assert "canary-1: v1.36.1 is 132 days behind v1.36.3" in html
    shot = out / "fleet-report.png"
    proc = subprocess.run([exe, *FLAGS, "--user-data-dir=%s" % profile, "--window-size=1100,900",
                           "--screenshot=%s" % shot, page.as_uri()], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    width, height, colours = png_pixels(shot)
    assert (width, height) == (1100, 900)
    # the bars' colours are on the page: the version bar (#1565c0), done (#2e7d32) and upgrading (#f9a825)
    assert {bytes.fromhex("1565c0"), bytes.fromhex("2e7d32"), bytes.fromhex("f9a825")} <= colours, len(colours)
    print("fleet report screenshot: %s (%dx%d, %d colours sampled)" % (shot, width, height, len(colours)))
