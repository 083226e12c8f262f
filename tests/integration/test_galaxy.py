"""The collection as a Galaxy user gets it: the built tarball holds the collection only, and the installed
collection runs its playbooks by FQCN from any directory, writing to ./out there."""
from __future__ import annotations

import fnmatch
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
# What a lab run or a developer leaves in a checkout; none of it may be packed.
LEFT_BEHIND = {"inventories/lab/kubeconfig": "client-key-data: not-for-galaxy\n",
               "inventories/lab/hosts.yml": "all: {}\n", "out/plan.json": "{}\n",
               "out/change-records/x.json": "{}\n"}
FORBIDDEN = ["lab/*", "bin/*", "tests/*", "benchmarks/*", ".ci/*", ".config/*", "roles/*/molecule/*", "molecule/*",
             "collections/*", "out/*", "inventories/lab/*", "*kubeconfig*", "Makefile", "ansible.cfg",
             "requirements-dev.txt", "pyproject.toml", ".git*", "*.pyc", "*/__pycache__/*"]
REQUIRED = ["MANIFEST.json", "FILES.json", "LICENSE", "README.md", "CHANGELOG.rst", "changelogs/changelog.yaml",
            "meta/runtime.yml", "requirements.txt", "playbooks/upgrade_wave.yml", "plugins/modules/cell.py",
            "plugins/action/controller.py", "plugins/plugin_utils/cell_action.py",
            "plugins/callback/change_record.py", "roles/drain/tasks/main.yml",
            "roles/drain/meta/argument_specs.yml", "inventories/example/hosts.yml"]


def run(*cmd, cwd, env_extra=None):
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", PATH="%s:%s" % (BIN, os.environ["PATH"]))
    for key in ("ANSIBLE_CONFIG", "GPUFLEET_CHANGE_RECORD_DIR", "GPUFLEET_OUT_DIR", "ANSIBLE_COLLECTIONS_PATH"):
        env.pop(key, None)
    env.update(env_extra or {})
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, "%s failed (%d):\n%s\n%s" % (cmd, proc.returncode, proc.stdout[-3000:],
                                                             proc.stderr[-3000:])
    return proc


@pytest.fixture(scope="module")
def tarball(tmp_path_factory):
    """Build from a copy of the checkout that also holds what a lab run leaves behind."""
    work = tmp_path_factory.mktemp("galaxy")
    src = work / "src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", "out", ".hypothesis", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".ansible", "__pycache__"))
    for rel, text in LEFT_BEHIND.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    run(BIN / "ansible-galaxy", "collection", "build", "--output-path", work, src, cwd=work)
    (built,) = work.glob("gpufleet-upgrade-*.tar.gz")
    return built


def test_tarball_holds_the_collection_only(tarball):
    with tarfile.open(tarball) as tar:
        names = [m.name for m in tar.getmembers() if m.isfile()]
        contents = [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]
    packed = [n for n in names for pattern in FORBIDDEN if fnmatch.fnmatch(n, pattern)]
    assert not packed, packed
    assert not [n for n in REQUIRED if n not in names], sorted(names)
    assert not any(b"not-for-galaxy" in text for text in contents)
    manifest = json.loads(dict(zip(names, contents))["MANIFEST.json"])
    assert manifest["collection_info"]["dependencies"] == {"kubernetes.core": ">=6.2.0,<6.3.0",
                                                           "amazon.aws": ">=8.0.0,<11.0.0"}
    assert manifest["collection_info"]["license"] == ["Apache-2.0"]


def test_installed_collection_runs_plan_by_fqcn_into_the_working_directory(tarball, tmp_path):
    """No ansible.cfg, no checkout: install the tarball, enable the callback as a user would, run the plan of the
    example cell by FQCN from an empty directory - the plan and the change record land in ./out there."""
    collections = tmp_path / "collections"
    run(BIN / "ansible-galaxy", "collection", "install", "--no-deps", "-p", collections, tarball, cwd=tmp_path)
    installed = collections / "ansible_collections" / "gpufleet" / "upgrade"
    before = sorted(p.relative_to(installed) for p in installed.rglob("*"))
    window = tmp_path / "window"
    window.mkdir()
    run(BIN / "ansible-playbook", "gpufleet.upgrade.plan", "-i", installed / "inventories/example/hosts.yml",
        cwd=window, env_extra={"ANSIBLE_COLLECTIONS_PATH": str(collections),
                               "ANSIBLE_CALLBACKS_ENABLED": "gpufleet.upgrade.change_record"})
    assert json.loads((window / "out" / "plan.json").read_text())["target"] == "v1.36.1"
    records = list((window / "out" / "change-records").glob("*-plan.yml.json"))
    assert len(records) == 1 and oct(records[0].stat().st_mode & 0o777) == "0o600"
    assert sorted(p.relative_to(installed) for p in installed.rglob("*")) == before  # nothing written inside


def test_execution_environment_takes_the_run_time_requirements_only(tarball, tmp_path):
    """ansible-builder, as it introspects an image's collections: the run-time needs (requirements.txt through
    meta/execution-environment.yml), not the development pins (without that file it falls back to them)."""
    import yaml

    collections = tmp_path / "collections"
    run(BIN / "ansible-galaxy", "collection", "install", "--no-deps", "-p", collections, tarball, cwd=tmp_path)
    out = run(BIN / "ansible-builder", "introspect", "--sanitize", collections, cwd=tmp_path).stdout
    deps = yaml.safe_load(out[out.index("---"):])
    wanted = ["kubernetes>=24.2.0", "prometheus-client>=0.16.0", "boto3>=1.34.0", "python-dateutil>=2.8"]
    assert [line.split("#")[0].strip() for line in deps["python"]] == wanted, deps
    assert deps["system"] == []
    definition = yaml.safe_load((ROOT / "execution-environment.yml").read_text())
    assert definition["version"] == 3
    # the collection's own dependencies (with their bounds) come with it from Galaxy, not listed again
    assert [c["name"] for c in definition["dependencies"]["galaxy"]["collections"]] == ["gpufleet.upgrade"]


def test_galaxy_installs_the_collection_and_its_tested_dependencies_within_their_bounds(tarball, tmp_path):
    """As `ansible-galaxy collection install gpufleet.upgrade` resolves it, offline: the collection and its
    dependencies as artifacts (the tested kubernetes.core and amazon.aws, packed from the development environment),
    resolved against galaxy.yml's bounds, without --pre (that the version is a release is test_bounds.py's)."""
    sys.path.insert(0, str(ROOT / "lab"))
    from gpufleet_lab import ee

    deps = tmp_path / "deps"
    deps.mkdir()
    packed = [ee.pack_installed(fqcn, deps) for fqcn in ("kubernetes.core", "amazon.aws")]
    requirements = tmp_path / "requirements.yml"
    requirements.write_text(json.dumps({"collections": [{"name": str(p), "type": "file"}
                                                        for p in [tarball, *packed]]}))
    dest = tmp_path / "installed"
    proc = run(BIN / "ansible-galaxy", "collection", "install", "--offline", "-r", requirements, "-p", dest,
               cwd=tmp_path, env_extra={"ANSIBLE_CONFIG": str(tmp_path / "none.cfg")})
    assert "gpufleet.upgrade:0.3.0 was installed successfully" in proc.stdout, proc.stdout
    manifests = {p.parent.relative_to(dest / "ansible_collections").as_posix().replace("/", "."):
                 json.loads(p.read_text())["collection_info"]["version"]
                 for p in (dest / "ansible_collections").glob("*/*/MANIFEST.json")}
    assert set(manifests) == {"gpufleet.upgrade", "kubernetes.core", "amazon.aws"}, manifests
