"""The bounds a Galaxy or AWX user installs within stop right after the versions CI tests.
plugins/plugin_utils/direct.py uses ansible-core internals and plugins/module_utils/kube.py kubernetes.core's
module_utils, so requires_ansible (meta/runtime.yml) stops at the tested ansible-core minor and galaxy.yml's
kubernetes.core at the tested minor (amazon.aws, used through its public s3_object only, at the tested major); the
execution environment asks pip for the ansible-core requires_ansible allows. The last test asks PyPI (as `make setup`
does) whether a newer ansible-core or `ansible` package inside the bounds exists: then the pins must move.

Not checked here (CI cannot reach Galaxy): a newer kubernetes.core patch (6.2.x) or amazon.aws release (up to 10.x)
on Galaxy, which a Galaxy install would take though CI has not run it, nor the lower bounds (ansible-core 2.19.0,
amazon.aws 8.0.0), which CI does not run either."""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = pathlib.Path(__file__).resolve().parents[2]
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
RUNTIME = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())
PINS = dict(line.split("==") for line in (ROOT / "requirements-dev.txt").read_text().splitlines()
            if "==" in line and not line.startswith("#"))


def installed_collection(fqcn: str) -> Version:
    """The version of a collection in the development environment, found as the lab's EE build finds it."""
    sys.path.insert(0, str(ROOT / "lab"))
    from gpufleet_lab import ee
    manifest = json.loads((ee.installed_collection(fqcn) / "MANIFEST.json").read_text())
    return Version(manifest["collection_info"]["version"])


def upper(spec: str) -> Version:
    (bound,) = [s for s in SpecifierSet(spec) if s.operator == "<"]
    return Version(bound.version)


def test_the_collection_version_is_a_release():
    assert re.fullmatch(r"\d+\.\d+\.\d+", GALAXY["version"]), (
        "galaxy.yml version %r: Galaxy skips pre-releases unless the user gives --pre" % GALAXY["version"])


def test_the_tested_versions_are_inside_the_bounds_and_the_bounds_stop_after_them():
    import ansible
    from ansible.release import __version__ as core
    del ansible
    core_v = Version(core)
    assert core_v == Version(PINS["ansible-core"])
    assert core_v in SpecifierSet(RUNTIME["requires_ansible"])
    assert upper(RUNTIME["requires_ansible"]) == Version("%d.%d.0" % (core_v.major, core_v.minor + 1))
    k8s = installed_collection("kubernetes.core")
    assert k8s in SpecifierSet(GALAXY["dependencies"]["kubernetes.core"])
    assert upper(GALAXY["dependencies"]["kubernetes.core"]) == Version("%d.%d.0" % (k8s.major, k8s.minor + 1))
    aws = installed_collection("amazon.aws")
    assert aws in SpecifierSet(GALAXY["dependencies"]["amazon.aws"])
    assert upper(GALAXY["dependencies"]["amazon.aws"]) == Version("%d.0.0" % (aws.major + 1))
    shipped = {c["name"]: c["version"] for c in yaml.safe_load((ROOT / "requirements.yml").read_text())["collections"]}
    assert shipped == {k: v for k, v in GALAXY["dependencies"].items()}


def test_the_execution_environment_asks_for_the_ansible_core_requires_ansible_allows():
    from packaging.requirements import Requirement
    definition = yaml.safe_load((ROOT / "execution-environment.yml").read_text())
    wanted = Requirement(definition["dependencies"]["ansible_core"]["package_pip"])
    assert wanted.name == "ansible-core"
    assert wanted.specifier == SpecifierSet(RUNTIME["requires_ansible"]), (
        "execution-environment.yml asks for %s, meta/runtime.yml's requires_ansible is %s"
        % (wanted, RUNTIME["requires_ansible"]))


def newest_on_pypi(package: str, spec: str) -> Version:
    proc = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, "pip index versions %s (PyPI is needed, as for make setup): %s" % (
        package, proc.stderr.strip()[-500:])
    found = re.search(r"Available versions: (.*)", proc.stdout)
    assert found, proc.stdout
    allowed = [Version(v) for v in found.group(1).split(", ") if Version(v) in SpecifierSet(spec)]
    return max(allowed)


def test_ci_tests_the_newest_releases_the_bounds_allow():
    core_spec = RUNTIME["requires_ansible"]
    assert newest_on_pypi("ansible-core", core_spec) == Version(PINS["ansible-core"]), (
        "a newer ansible-core inside requires_ansible %s exists: pin it in requirements-dev.txt (make freeze) and "
        "run CI" % core_spec)
    # kubernetes.core reaches the development environment in the `ansible` package of the pinned ansible-core's
    # line: the newest such package carries the newest kubernetes.core CI can test.
    ansible_major = Version(PINS["ansible"]).major
    assert newest_on_pypi("ansible", "==%d.*" % ansible_major) == Version(PINS["ansible"]), (
        "a newer ansible %d.x exists: pin it (its kubernetes.core may be newer) and run CI" % ansible_major)
