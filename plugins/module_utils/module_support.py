# Copyright: gpufleet contributors
# Apache License 2.0
"""The one place where gpufleet modules meet AnsibleModule: tool execution and error conversion.

Every check module either runs its tool (``binary`` + ``args``) or judges output captured elsewhere
(``output``). Pure logic stays in the other module_utils; this file only moves text in and results out.
"""
from __future__ import annotations

import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError


def run_tool(module: Any, binary: str, args: Sequence[str], ok_rcs: Sequence[int] = (0,),
             allow_output_on_error: bool = False) -> Optional[Dict[str, Any]]:
    """Run ``binary args`` and return ``{cmd, rc, stdout, stderr}``; None in check mode (the tool is not run:
    several of these tools load GPUs for minutes). A missing binary or an unexpected exit fails the module with
    the command and its stderr."""
    if module.check_mode:
        return None
    path = module.get_bin_path(binary, required=False) if "/" not in binary else binary
    if not path:
        module.fail_json(msg="%s: not found on this host; install it or give its full path in 'binary'" % binary)
    cmd: List[str] = [path] + [str(a) for a in args]
    rc, stdout, stderr = module.run_command(cmd)
    if rc not in ok_rcs and not (allow_output_on_error and stdout.strip()):
        module.fail_json(msg="%s exited %d: %s" % (" ".join(cmd), rc, (stderr or stdout).strip()[-2000:]),
                         rc=rc, stdout=stdout, stderr=stderr, cmd=cmd)
    return {"cmd": cmd, "rc": rc, "stdout": stdout, "stderr": stderr}


def tool_text(module: Any, default_binary: str, default_args: Sequence[str], **kwargs: Any) -> Optional[str]:
    """``output`` when given, else the stdout of the tool (None in check mode)."""
    if module.params.get("output") is not None:
        return str(module.params["output"])
    result = run_tool(module, module.params.get("binary") or default_binary,
                      module.params.get("args") if module.params.get("args") is not None else default_args, **kwargs)
    return None if result is None else str(result["stdout"])


def as_result(values: Dict[str, Any]) -> Dict[str, Any]:
    """``values`` as a module result: the judged lines to look at by hand go out as ``notices`` (after any the
    module already returns there). ansible-core reserves ``warnings`` in a result: deprecated in 2.19, removed in
    2.23, and an empty list is dropped from the result already, so a role reading it failed on a cell with nothing
    to look at."""
    result = {k: v for k, v in values.items() if k != "warnings"}
    if "warnings" in values:
        result["notices"] = list(result.get("notices") or []) + list(values["warnings"] or [])
    return result


def _show(module: Any, values: Dict[str, Any]) -> Dict[str, Any]:
    """Each line to look at by hand also shown as a warning of the task (the console, AWX's job events), as
    ansible-core's ``AnsibleModule.warn`` shows it; then :func:`as_result`."""
    for line in values.get("warnings") or []:
        module.warn(str(line))
    return as_result(values)


def run_module(module: Any, body: Callable[[], Dict[str, Any]]) -> None:
    """Run ``body`` and exit. Checks never change a host: ``changed`` is always False. A :class:`GpufleetError`
    becomes ``fail_json`` with its message and structured details; any other exception (a bug, or input no parser
    anticipated) becomes a clear failure naming the module and what it was given, with the traceback shown only in
    verbose output (-vvv). A ``warnings`` list in either is shown as the task's warnings and returned as
    ``notices`` (:func:`_show`)."""
    try:
        result = _show(module, body())
    except GpufleetError as exc:
        details = _show(module, {k: v for k, v in exc.details.items() if k not in ("msg", "failed", "exception")})
        module.fail_json(msg=exc.msg, error_type=type(exc).__name__, **details)
        return
    except Exception as exc:
        name = getattr(module, "_name", "") or "gpufleet module"
        given = ", ".join(sorted(k for k, v in (module.params or {}).items() if v not in (None, [], {}, "")))
        module.fail_json(msg="%s failed on its input (%s given): %s: %s. Nothing was judged as passed; run with "
                             "-vvv for the traceback and report it with the input." % (
                                 name, given or "no options", type(exc).__name__, str(exc)[:500]),
                         error_type="UnexpectedError", exception=traceback.format_exc())
        return
    result.setdefault("changed", False)
    module.exit_json(**result)


def check_mode_skip(what: str) -> Dict[str, Any]:
    return {"skipped": True, "msg": "check mode: %s was not run; give 'output' to judge captured output" % what}
