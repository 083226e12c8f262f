"""The execution environment CI builds (lab/gpufleet_lab/ee.py) is the shipped execution-environment.yml with only
what cannot be reached here replaced - the base image and Galaxy - and the shipped one carries the Helm the lab
tests against."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "lab"))

from gpufleet_lab import ee

SHIPPED = yaml.safe_load((ROOT / "execution-environment.yml").read_text())


def test_the_lab_build_replaces_only_the_base_image_and_galaxy_and_adds_only_their_plumbing():
    built = ee.definition(SHIPPED, "localhost/base:x", ["gpufleet-upgrade-0.3.0.tar.gz"])
    assert built["images"] == {"base_image": {"name": "localhost/base:x"}}
    assert built["dependencies"]["galaxy"] == {"collections": [
        {"name": "/build/collections/gpufleet-upgrade-0.3.0.tar.gz", "type": "file"}]}
    # how the local tarballs get in, and pip already in the base: the only other additions
    assert built["additional_build_files"] == [{"src": "collections", "dest": "collections"}]
    assert built["additional_build_steps"]["prepend_galaxy"] == ["COPY _build/collections /build/collections"]
    assert built["options"] == dict(SHIPPED["options"], skip_pip_install=True)
    for key in set(SHIPPED) | set(built):
        if key not in ("images", "additional_build_files", "options", "dependencies", "additional_build_steps"):
            assert built[key] == SHIPPED[key], key
    assert {k: v for k, v in built["dependencies"].items() if k != "galaxy"} == {
        k: v for k, v in SHIPPED["dependencies"].items() if k != "galaxy"}
    assert {k: v for k, v in built["additional_build_steps"].items() if k != "prepend_galaxy"} == \
        SHIPPED["additional_build_steps"]


def test_the_shipped_definition_builds_the_labs_helm_and_asks_galaxy_for_this_release():
    lab = yaml.safe_load((ROOT / "lab" / "lab.yml").read_text())
    steps = SHIPPED["additional_build_steps"]["prepend_base"]
    assert steps[0] == "ARG HELM_VERSION=%s" % lab["versions"]["helm"]
    assert '"helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"' in steps[1] and "helm version" in steps[1]
    # a distribution's go.env may turn the proxy, the checksum database and toolchain downloads off: set here
    for setting in ("GOPROXY=https://proxy.golang.org,direct", "GOSUMDB=sum.golang.org", "GOTOOLCHAIN=auto"):
        assert setting in steps[1].split(), setting
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    major, minor, _ = version.split(".")
    (ours,) = [c for c in SHIPPED["dependencies"]["galaxy"]["collections"] if c["name"] == "gpufleet.upgrade"]
    assert ours["version"] == ">=%s,<%s.%d.0" % (version, major, int(minor) + 1)


def test_the_dnf_stand_in_maps_the_calls_to_apt_and_skips_golang(tmp_path):
    (tmp_path / "dnf").write_text(ee.DNF_SHIM)
    (tmp_path / "apt-get").write_text('#!/bin/sh\necho "apt-get $*" >> "%s"\n' % (tmp_path / "calls"))
    for tool in ("dnf", "apt-get"):
        (tmp_path / tool).chmod(0o755)
    env = {"PATH": "%s:/usr/bin:/bin" % tmp_path}

    def dnf(*args):
        return subprocess.run([str(tmp_path / "dnf"), *args], env=env, capture_output=True, text=True, check=False)

    assert dnf("install", "-y", "golang").returncode == 0 and not (tmp_path / "calls").exists()
    assert dnf("install", "-y", "--setopt=x", "golang", "openssh-client").returncode == 0
    assert dnf("remove", "-y", "golang").returncode == 0
    assert dnf("clean", "all").returncode == 0
    bad = dnf("upgrade")
    assert bad.returncode == 2 and "'upgrade' is not supported" in bad.stderr
    assert (tmp_path / "calls").read_text().splitlines() == [
        "apt-get update -qq", "apt-get install -y -qq --no-install-recommends openssh-client", "apt-get clean"]
    assert "COPY go /usr/local/go" in ee.BASE_CONTAINERFILE and "helm" not in ee.BASE_CONTAINERFILE
