"""The execution-environment image the lab runs AWX-style jobs in, built with ansible-builder from the project's own
execution-environment.yml.

No registry or Galaxy server is reachable here, so two things differ from a production build, and only these two:
- the base image is local: the lab's Debian bookworm host image (Python 3.11) with pip, the machine's CA bundle
  (pip reaches the package index through it), the machine's Go toolchain (Debian's golang is too old to build
  Helm; the shipped definition's Helm step installs and removes its distribution's golang, which the stand-in
  skips) and a `dnf` stand-in that maps ansible-builder 3's package-manager calls and the definition's
  (`install -y PKGS`, `remove -y PKGS`, `clean all`) to apt (``BASE``, built once per lab image tag);
- the collections come from local tarballs instead of Galaxy: gpufleet.upgrade built from this checkout, and its
  dependencies packed from the copies installed in the development virtualenv.
Everything else (ansible-core, ansible-runner, the collections' Python requirements found by introspection, the
system packages for the Debian platform, the Helm CLI built from its Go module in the base stage) is what
ansible-builder does with the shipped definition.

  lab ee    -> builds (layer-cached) and prints the image name
"""
from __future__ import annotations

import fcntl
import hashlib
import io
import json
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from typing import Dict, List

import yaml

from gpufleet_lab import config
from gpufleet_lab.procs import LabError

IMAGE = "localhost/gpufleet-ee:lab"
BASE_REVISION = 5  # bump when BASE_CONTAINERFILE or DNF_SHIM changes
BASE_CONTAINERFILE = """\
FROM {host_image}
# pip (Debian disables ensurepip for its system Python, so the definition skips ansible-builder's pip step); the
# machine's CA bundle, through which pip reaches the package index
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \\
      python3-pip >/dev/null && apt-get clean && rm -rf /var/lib/apt/lists/* \\
    && rm -f /usr/lib/python3.11/EXTERNALLY-MANAGED
COPY dnf /usr/bin/dnf
# Go, for the definition's Helm build (GOTOOLCHAIN=auto there fetches a newer one if Helm's go.mod asks for it)
COPY go /usr/local/go
ENV PATH=/usr/local/go/bin:$PATH
"""
# ansible-builder 3 calls "$PKGMGR install -y [opts] PKGS" and "$PKGMGR clean all"; the definition's Helm step
# "$PKGMGR install -y golang" and "$PKGMGR remove -y golang". golang is the base's own Go (see BASE_CONTAINERFILE).
DNF_SHIM = """\
#!/bin/sh
# dnf on a Debian base for ansible-builder 3 (lab only): install -> apt-get install, remove -> apt-get remove,
# clean -> apt-get clean; golang is skipped (the base carries Go in /usr/local/go).
set -e
cmd=$1; shift
pkgs=$(for a in "$@"; do case "$a" in -*|golang) ;; *) echo "$a" ;; esac; done)
case "$cmd" in
  install)
    [ -n "$pkgs" ] || exit 0
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs ;;
  remove)
    [ -n "$pkgs" ] || exit 0
    DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq $pkgs ;;
  clean) apt-get clean; rm -rf /var/lib/apt/lists/* ;;
  *) echo "dnf (apt stand-in): '$cmd' is not supported" >&2; exit 2 ;;
esac
"""


def say(msg: str) -> None:
    print("lab ee: %s" % msg, flush=True)


def _run(argv: List[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kw)
    if proc.returncode:
        raise LabError("%s failed (rc=%d):\n%s" % (" ".join(argv[:3]), proc.returncode,
                                                   (proc.stdout + proc.stderr)[-4000:]))
    return proc


GOROOT = pathlib.Path(shutil.which("go") or "/usr/local/go/bin/go").resolve().parents[1]


def go_version() -> str:
    """The machine's Go release (its GOROOT/VERSION first line, e.g. go1.26.8): part of the base image's name."""
    try:
        return (GOROOT / "VERSION").read_text().split()[0]
    except (OSError, IndexError) as exc:
        raise LabError("no Go toolchain at %s (the execution environment's Helm build needs one): %s"
                       % (GOROOT, exc)) from exc


def base_image(cfg: config.LabConfig) -> str:
    name = "localhost/gpufleet-ee-base:%s-%d-%s" % (cfg.image_tag, BASE_REVISION, go_version())
    if subprocess.run(["podman", "image", "exists", name], check=False).returncode == 0:
        return name
    say("building the base %s from the lab's host image (apt, about a minute)" % name)
    with tempfile.TemporaryDirectory() as ctx:
        path = pathlib.Path(ctx)
        (path / "Containerfile").write_text(BASE_CONTAINERFILE.format(
            host_image="localhost/gpufleet-lab-host:%s" % cfg.image_tag))
        shutil.copy("/etc/ssl/certs/ca-certificates.crt", path / "ca-certificates.crt")
        (path / "dnf").write_text(DNF_SHIM)
        (path / "dnf").chmod(0o755)
        shutil.copytree(GOROOT, path / "go", symlinks=True)
        _run(["podman", "build", "--network=host", "-t", name, str(path)])
    return name


def installed_collection(fqcn: str) -> pathlib.Path:
    import ansible_collections  # the development virtualenv's (the `ansible` package's) collections
    namespace, name = fqcn.split(".")
    for root in ansible_collections.__path__:
        found = pathlib.Path(root) / namespace / name
        if (found / "MANIFEST.json").is_file():
            return found
    raise LabError("collection %s is not installed in %s (run make setup)" % (fqcn, sys.prefix))


def pack_installed(fqcn: str, out: pathlib.Path) -> pathlib.Path:
    """An installed collection is its artifact unpacked (MANIFEST.json, FILES.json and the files they list). The
    `ansible` package leaves some listed files out (CI workflows and the like), so FILES.json is rewritten to what is
    there, with its checksum in MANIFEST.json to match (ansible-galaxy checks both on install)."""
    src = installed_collection(fqcn)
    manifest = json.loads((src / "MANIFEST.json").read_text())
    files = json.loads((src / "FILES.json").read_text())
    files["files"] = [f for f in files["files"] if f["name"] == "." or (src / f["name"]).exists()]
    files_json = json.dumps(files, indent=4).encode()
    manifest["file_manifest_file"]["chksum_sha256"] = hashlib.sha256(files_json).hexdigest()
    info = manifest["collection_info"]
    tarball = out / ("%s-%s-%s.tar.gz" % (info["namespace"], info["name"], info["version"]))
    with tarfile.open(tarball, "w:gz") as tar:
        for name, data in (("MANIFEST.json", json.dumps(manifest, indent=4).encode()), ("FILES.json", files_json)):
            member = tarfile.TarInfo(name)
            member.size, member.mode = len(data), 0o644
            tar.addfile(member, io.BytesIO(data))
        for entry in files["files"]:
            if entry["name"] != ".":
                tar.add(src / entry["name"], arcname=entry["name"], recursive=False)
    return tarball


def definition(shipped: Dict, base: str, tarballs: List[str]) -> Dict:
    """The shipped definition with the local base and the local collection tarballs (see the module doc)."""
    doc = json.loads(json.dumps(shipped))
    doc["images"] = {"base_image": {"name": base}}
    doc["dependencies"]["galaxy"] = {"collections": [{"name": "/build/collections/" + t, "type": "file"}
                                                     for t in tarballs]}
    doc["additional_build_files"] = [{"src": "collections", "dest": "collections"}]
    doc.setdefault("options", {})["skip_pip_install"] = True
    steps = doc.setdefault("additional_build_steps", {})
    steps["prepend_galaxy"] = list(steps.get("prepend_galaxy", [])) + ["COPY _build/collections /build/collections"]
    return doc


def build(cfg: config.LabConfig) -> str:
    """Build (or find in podman's layer cache) the image; one build at a time (make test starts one beside the lab
    tests, whose fixture asks again)."""
    cfg.cache.mkdir(parents=True, exist_ok=True)
    with open(cfg.cache / "ee.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(cfg)


def _build(cfg: config.LabConfig) -> str:
    base = base_image(cfg)
    with tempfile.TemporaryDirectory() as work:
        path = pathlib.Path(work)
        (path / "collections").mkdir()
        _run([str(pathlib.Path(sys.executable).parent / "ansible-galaxy"), "collection", "build", "--force",
              "--output-path", str(path / "collections"), str(config.REPO)])
        deps = yaml.safe_load((config.REPO / "galaxy.yml").read_text()).get("dependencies") or {}
        for fqcn in deps:
            pack_installed(fqcn, path / "collections")
        tarballs = sorted(p.name for p in (path / "collections").glob("*.tar.gz"))
        shipped = yaml.safe_load((config.REPO / "execution-environment.yml").read_text())
        (path / "execution-environment.yml").write_text(yaml.safe_dump(definition(shipped, base, tarballs)))
        say("ansible-builder build %s (base %s; collections %s)" % (IMAGE, base, ", ".join(tarballs)))
        _run([str(pathlib.Path(sys.executable).parent / "ansible-builder"), "build", "-t", IMAGE,
              "--container-runtime", "podman", "-f", "execution-environment.yml", "-c", "context",
              "--extra-build-cli-args=--network=host",
              "--build-arg", "ANSIBLE_GALAXY_CLI_COLLECTION_OPTS=--offline"], cwd=path)
    return IMAGE
