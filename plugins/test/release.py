# Copyright: gpufleet contributors
# Apache License 2.0
"""Jinja test ``release``: the value is a Kubernetes release in the canonical form ``vX.Y.Z`` that the cell hands
to the roles (module_utils/versions.py parses it; the roles do not parse versions themselves)."""
from __future__ import annotations

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import parse_release


def release(value):
    try:
        return isinstance(value, str) and str(parse_release(value)) == value
    except GpufleetError:
        return False


class TestModule:
    def tests(self):
        return {"release": release}
