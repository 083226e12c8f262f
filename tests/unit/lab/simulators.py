"""Run the lab's simulators (SIMULATION, lab/simulators) here, without the lab, against a temporary state
directory - what the lab's podman hosts give them. One runner for every test of tests/unit/lab that runs them."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any, Dict, Iterable, Mapping, Optional

SIM = pathlib.Path(__file__).resolve().parents[3] / "lab" / "simulators"
HOST_STATE: Dict[str, Any] = {"gpus": 8, "persistence": True, "faults": {}, "services": {}}


class Simulators:
    """A host's state directory (``state.json`` from ``state``, package versions from ``versions``) and the
    environment the simulators read it through; ``extra_env`` adds to it."""

    def __init__(self, tmp_path: pathlib.Path, versions: Mapping[str, str], state: Optional[Mapping[str, Any]] = None,
                 extra_env: Optional[Mapping[str, str]] = None) -> None:
        self.state_dir, self.versions = tmp_path / "state", tmp_path / "versions"
        (self.state_dir / "cluster").mkdir(parents=True)
        self.versions.mkdir()
        for key, value in versions.items():
            self.set_version(key, value)
        self.state = dict(HOST_STATE if state is None else state)
        self.write_state()
        self.env = dict(os.environ, GPUFLEET_SIM_STATE=str(self.state_dir), GPUFLEET_SIM_VERSIONS=str(self.versions),
                        GPUFLEET_SIM_LIB=str(SIM), GPUFLEET_SIM_HOST="gpu-a1", **(extra_env or {}))

    def write_state(self, faults: Iterable[str] = (), **changes: Any) -> None:
        """state.json anew: the starting state with ``changes`` and exactly ``faults``."""
        (self.state_dir / "state.json").write_text(json.dumps(dict(
            self.state, **changes, faults={f: True for f in faults})))

    def fault(self, kind: str) -> None:
        """Add one fault to the faults state.json has now."""
        data = json.loads((self.state_dir / "state.json").read_text())
        data["faults"][kind] = True
        (self.state_dir / "state.json").write_text(json.dumps(data))

    def set_version(self, key: str, value: str) -> None:
        (self.versions / (key + ".version")).write_text(value + "\n")

    def run(self, tool: str, *args: str, rc: Optional[int] = 0, host: str = "gpu-a1") -> subprocess.CompletedProcess:
        """Run ``tool`` on ``host``; unless ``rc`` is None, its exit status must be ``rc``."""
        proc = subprocess.run([sys.executable, str(SIM / tool), *args], capture_output=True, text=True,
                              env=dict(self.env, GPUFLEET_SIM_HOST=host), check=False, timeout=60)
        if rc is not None:
            assert proc.returncode == rc, proc.stdout + proc.stderr
        return proc
