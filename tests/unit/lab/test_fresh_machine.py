"""A fresh machine: the README's set-up from a fresh clone with an empty cache gets as far as the first build.

`make lab-up` (what `make wave` and `make test` run first) from a copy of the checkout's files, with HOME and the lab
cache pointing at directories that do not exist yet; the lab stops right before the first download and compile
(GPUFLEET_LAB_STOP_BEFORE_BUILD). The virtual environment is the one running this test (building another would
only repeat pip), passed as make's VENV. Lab-free: no lab process or container is started, nothing is built (the
machine set-up `make lab-up` runs first, lab/build/host-setup.sh, is idempotent and finds everything in place)."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
VENV = pathlib.Path(sys.executable).parents[1]


def fresh_clone(dest: pathlib.Path) -> pathlib.Path:
    """The files a clone of this working tree holds (tracked and not ignored), without .git or anything built."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.split(b"\0")
    for rel in filter(None, (p.decode() for p in listed)):
        src = ROOT / rel
        if not os.path.lexists(src):  # deleted in the working tree
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dest / rel)
        elif src.is_file():
            shutil.copy2(src, dest / rel)
    return dest


def test_fresh_clone_with_empty_cache_gets_to_the_first_build(tmp_path):
    clone = fresh_clone(tmp_path / "clone")
    home = tmp_path / "home"  # does not exist: nothing under ~/.cache either
    # nothing of this machine's cache may leak in: GPUFLEET_LAB_CACHE, or the Makefile's CACHE/LAB_CACHE from the
    # environment (with CACHE set, a cold-cache CI rehearsal once brought up the real lab from here)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUFLEET_", "MAKE", "MFLAGS")) and k not in ("CACHE", "LAB_CACHE")}
    env.update(HOME=str(home), GPUFLEET_LAB_STOP_BEFORE_BUILD="1", GPUFLEET_VENV=str(VENV))
    proc = subprocess.run(["make", "--no-print-directory", "lab-up", "VENV=%s" % VENV], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    cache = home / ".cache" / "gpufleet" / "lab"
    assert "lab build: dry run - etcd" in out and "in %s/build-etcd-" % cache in out, out[-4000:]
    assert "stopping before the first build" in out and "go version go1." in out  # Go answered
    assert "go: creating new go.mod: module gpufleet.lab/dry-run" in out
    assert cache.is_dir() and not list(cache.glob("build-*")), sorted(cache.iterdir())  # work dir removed
    assert not (clone / "inventories" / "lab" / "kubeconfig").exists()
