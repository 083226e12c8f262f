"""The ``run`` fixture: a module's main() through AnsibleModule with exit/fail patched to raise, run_command
patched to replay answers (so the command line is checked too), and check mode on request."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class Exit(Exception):
    def __init__(self, result: Dict[str, Any], failed: bool) -> None:
        super().__init__(result.get("msg", ""))
        self.result = result
        self.failed = failed


@pytest.fixture
def run(monkeypatch):
    def exit_json(self, **kwargs):
        raise Exit(kwargs, False)

    def fail_json(self, msg, **kwargs):
        kwargs["msg"] = msg
        raise Exit(kwargs, True)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)

    def _run(module, args: Dict[str, Any], commands: Optional[Dict[str, Any]] = None, check_mode: bool = False):
        calls: List[List[str]] = []

        def run_command(self, cmd, *a, **kw):
            calls.append(list(cmd))
            key = " ".join(cmd[1:])
            for prefix, answer in (commands or {}).items():
                if key.startswith(prefix):
                    return answer
            raise AssertionError("unexpected command %r" % cmd)

        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **kw: "/usr/bin/" + name)
        if check_mode:
            args = dict(args, _ansible_check_mode=True)
        with patch_module_args(args), pytest.raises(Exit) as exc:
            module.main()
        exc.value.result["_calls"] = calls
        return exc.value

    return _run


