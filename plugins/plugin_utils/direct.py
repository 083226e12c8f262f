# Copyright: gpufleet contributors
# Apache License 2.0
"""Direct execution: a gpufleet module whose task runs on the controller (``delegate_to: localhost``, a
``connection: local`` play) runs inside Ansible's worker process instead of a new Python process.

Why: most gpufleet tasks talk to the Kubernetes API from the controller. As a separate process each one paid about
0.5 CPU-s before doing anything - Python, ``ansible.module_utils.basic`` compiled from the AnsiballZ zip, and the
``kubernetes`` client (about 0.25 s: it imports every API and model class). That was about 40 % of the CPU of an
upgrade run (docs/design/direct-execution.md). The worker is forked from ``ansible-playbook``, which imported the
``kubernetes`` client once when it loaded this plugin, so a task here pays only for its own work. ansible.netcommon
does the same for network modules (its ``import_modules`` option); ansible-core keeps a hook for it
(``AnsibleModule._record_module_result``). Nothing is written by hand that a library does: the module's own
``main()`` runs unchanged, its arguments are encoded and its result decoded with ansible-core's own module JSON
profile, exactly as on the AnsiballZ path.

The module still runs as a separate process (the ordinary path) when the task does not run on the controller
(an SSH host), uses ``become`` or ``async``, runs for a host whose Python interpreter is not the controller's or is
left to interpreter discovery (the implicit localhost's is the controller's), or when ``GPUFLEET_DIRECT_EXECUTION``
is set to anything but 1/true/yes/on in the controller's environment. The task's ``environment`` (for example
``K8S_AUTH_*``) is applied to the worker for the module's run, as it would be to the module's process, and what
a module process would have had to itself is reset around each run (:func:`isolated`).
"""
from __future__ import annotations

import contextlib
import importlib
import io
import json
import locale
import os
import sys
import traceback
import shutil
import tempfile
from typing import Any, Dict, Mapping, Optional, Tuple

from ansible.plugins.action import ActionBase
from ansible.release import __version__ as ansible_version
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash
from ansible.vars.clean import remove_internal_keys

# ansible-core internals a module run in the worker needs (AnsibleModule's argument and warning state, the module
# JSON profile): requires_ansible stops at the tested minor, and should a release still lack one of them, every
# module runs as its own process (the ordinary path) with the reason at -vvvv, instead of this plugin failing to load.
try:
    from ansible.module_utils import basic
    from ansible.module_utils.common import warnings as module_warnings
    from ansible.module_utils.common.json import Direction, get_module_encoder
    for _name in ("_ANSIBLE_ARGS", "_ANSIBLE_PROFILE"):
        getattr(basic, _name)
    for _name in ("_global_warnings", "_global_deprecations"):
        getattr(module_warnings, _name)
    INTERNALS_MISSING = ""
except (ImportError, AttributeError) as _exc:  # pragma: no cover - an ansible-core outside requires_ansible
    INTERNALS_MISSING = "ansible-core %s lacks what direct execution uses (%s)" % (ansible_version, _exc)

try:  # loaded here, in ansible-playbook, so that every forked worker has the client already imported
    from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube as PRELOADED
except ImportError:  # pragma: no cover - kubernetes missing: the modules say so when they run
    PRELOADED = None

display = Display()

PROFILE = "legacy"  # gpufleet modules declare no METADATA, so ansible-core encodes their I/O with this profile
LOCAL_CONNECTIONS = frozenset(("local", "ansible.builtin.local"))
SWITCH = "GPUFLEET_DIRECT_EXECUTION"
# Modules whose relative paths mean the controller's working directory (where ansible-playbook was started): given
# it as ``working_dir`` whichever way they run. As its own process on the local connection a module runs in the
# playbook's directory (inside an installed collection), where a relative cell inventory or ./out are not.
CONTROLLER_CWD = frozenset(("fleet_plan",))


def ineligible(connection: str, become: bool, async_val: int, interpreter: Optional[str], executable: str,
               environ: Mapping[str, str]) -> str:
    """Why this task's module must run as its own process ('' when it can run in the worker): a task on another
    host, with privilege escalation or async, or for another Python than the controller's; or the switch is off."""
    if switched_off(environ):
        return "%s=%s" % (SWITCH, environ.get(SWITCH))
    if INTERNALS_MISSING:
        return INTERNALS_MISSING
    if connection not in LOCAL_CONNECTIONS:
        return "connection %s" % connection
    if become:
        return "become"
    if async_val:
        return "async"
    if not interpreter:  # an inventory host left to interpreter discovery: its module ran on the Python found
        return "no ansible_python_interpreter (discovery)"
    # the same file in the same directory: a venv's python and python3 are the controller's; the base interpreter
    # a venv links to (realpath's answer) lacks the venv's packages, and python3.9 beside python3.12 is another one
    if not same_interpreter(interpreter, executable):
        return "interpreter %s is not the controller's %s" % (interpreter, executable)
    return ""


def same_interpreter(interpreter: str, executable: str) -> bool:
    if os.path.dirname(os.path.abspath(interpreter)) != os.path.dirname(os.path.abspath(executable)):
        return False
    try:
        return os.path.samefile(interpreter, executable)
    except OSError:
        return False


def switched_off(environ: Mapping[str, str]) -> bool:
    """Only unset, 1, true, yes or on keep direct execution: any other value runs modules as their own process."""
    value = environ.get(SWITCH)
    return value is not None and value.strip().lower() not in ("1", "true", "yes", "on")


@contextlib.contextmanager
def isolated(extra: Mapping[str, Any]):
    """What a module process would have had to itself, for one module run in the worker, then as it was: the
    controller's environment with the task's on top (and the temporary directory and locale that follow from it),
    the working directory, and the kubernetes client's process state - the kubeconfig path it read from $KUBECONFIG
    at import (in ansible-playbook, without the task's environment), its default Configuration (load_kube_config
    keeps credentials there), kubernetes.core's client pool, and the certificate and key files it writes from a
    kubeconfig's *-data fields (a module process removes them at exit; a worker ends without running exit
    handlers). Each restore runs even when another fails; a failed restore is a warning, never the task's result."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_tempdir, saved_locale = tempfile.tempdir, locale.setlocale(locale.LC_ALL)
    restores = [  # the key files first: they are what must not outlive the run
        ("the kubernetes client's state", kube_state),
        ("the environment", lambda: (os.environ.clear(), os.environ.update(saved_env))),
        ("the working directory", lambda: os.chdir(saved_cwd)),
        ("the temporary directory", lambda: setattr(tempfile, "tempdir", saved_tempdir)),
        ("the locale", lambda: locale.setlocale(locale.LC_ALL, saved_locale)),
    ]
    try:
        os.environ.update({str(k): str(v) for k, v in extra.items()})
        tempfile.tempdir = None  # $TMPDIR of this run, as a module process reads it
        kube_state()
        yield
    finally:
        for what, restore in restores:
            try:
                restore()
            except Exception as exc:  # pylint: disable=broad-exception-caught
                display.warning("gpufleet: could not restore %s after a module run in the worker: %s" % (what, exc))
        kube_config_default(os.environ.get("KUBECONFIG", "~/.kube/config"))


def kube_state() -> None:
    """Reset the kubernetes client's process-wide state (see :func:`isolated`), its default kubeconfig path taken
    from the environment as it is now."""
    try:
        from kubernetes.client import Configuration
        from kubernetes.config import kube_config
    except ImportError:
        return
    kube_config._cleanup_temp_files()  # pylint: disable=protected-access
    Configuration.set_default(None)
    kube_config_default(os.environ.get("KUBECONFIG", "~/.kube/config"))
    try:
        from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client as k8s_client
        k8s_client._pool.clear()  # pylint: disable=protected-access
    except (ImportError, AttributeError):
        pass


def kube_config_default(path: str) -> None:
    try:
        from kubernetes.config import kube_config
    except ImportError:
        return
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = path


def run_main(module: Any, module_args: Dict[str, Any]) -> Tuple[str, str]:
    """Run ``module.main()`` with ``module_args`` as AnsibleModule reads them on the AnsiballZ path (the JSON
    ansible-core sends, in this profile) and return what it printed on stdout (its JSON result) and stderr. A
    module exits with SystemExit, as always; an exception it lets out becomes a failure with its traceback, like a
    module process that died."""
    encoder = get_module_encoder(PROFILE, Direction.CONTROLLER_TO_MODULE)
    args = json.dumps({"ANSIBLE_MODULE_ARGS": module_args}, cls=encoder).encode()
    basic._ANSIBLE_ARGS = args  # pylint: disable=protected-access
    basic._ANSIBLE_PROFILE = PROFILE  # pylint: disable=protected-access
    module_warnings._global_warnings.clear()  # pylint: disable=protected-access
    module_warnings._global_deprecations.clear()  # pylint: disable=protected-access
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            module.main()
    except SystemExit:
        pass
    except Exception as exc:  # pylint: disable=broad-exception-caught
        return failure(exc), err.getvalue()
    finally:
        basic._ANSIBLE_ARGS = None  # pylint: disable=protected-access
    return out.getvalue(), err.getvalue()


def module_name(task: Any) -> str:
    """The module a task runs, without its collection (``gang`` for ``gpufleet.upgrade.gang``)."""
    return str(getattr(task, "resolved_action", None) or task.action).rsplit(".", maxsplit=1)[-1]


def failure(exc: BaseException) -> str:
    msg = "MODULE FAILURE: %s: %s (run in the worker; set %s=0 to run it as its own process)" % (
        type(exc).__name__, exc, SWITCH)
    return json.dumps({"failed": True, "msg": msg, "exception": traceback.format_exc()})


class DirectActionModule(ActionBase):
    """How a gpufleet module runs from plugins/action/controller.py (see the module docstring)."""

    _supports_check_mode = True
    _supports_async = True

    def _module(self) -> Any:
        return importlib.import_module("ansible_collections.gpufleet.upgrade.plugins.modules.%s"
                                       % module_name(self._task))

    def _module_args(self) -> Dict[str, Any]:
        args = dict(self._task.args)
        if module_name(self._task) in CONTROLLER_CWD:
            args["working_dir"] = os.path.abspath(args.get("working_dir") or os.getcwd())  # the controller's
        return args

    def _interpreter(self, task_vars: Dict[str, Any]) -> Optional[str]:
        host_vars = task_vars
        if self._task.delegate_to:
            host_vars = (task_vars.get("ansible_delegated_vars") or {}).get(self._task.delegate_to) or {}
        value = host_vars.get("ansible_python_interpreter")
        return self._templar.template(value) if value else None

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        why = ineligible(str(self._connection.transport),
                         bool(self._play_context.become), int(self._task.async_val or 0),
                         self._interpreter(task_vars), sys.executable, os.environ)
        if why:
            display.vvvv("gpufleet: %s runs as its own process (%s)" % (self._task.action, why))
            wrap_async = self._task.async_val and not self._connection.has_native_async
            result = merge_hash(result, self._execute_module(module_args=self._module_args(), task_vars=task_vars,
                                                             wrap_async=wrap_async))
            if not wrap_async:
                self._remove_tmp_path(self._connection._shell.tmpdir)  # pylint: disable=protected-access
            return result
        display.vvvv("gpufleet: %s runs in the worker process%s" % (
            self._task.action, "" if PRELOADED else " (the kubernetes client was not preloaded)"))
        module_args = self._module_args()
        self._update_module_args(self._task.action, module_args, task_vars)
        env: Dict[str, Any] = {}
        self._compute_environment_string(raw_environment_out=env)
        with isolated(env):
            tmpdir = tempfile.mkdtemp(prefix="gpufleet-module-")  # module.tmpdir, in the run's $TMPDIR
            module_args["_ansible_tmpdir"] = tmpdir
            try:
                try:
                    module = self._module()
                except Exception as exc:  # pylint: disable=broad-exception-caught
                    stdout, stderr = failure(exc), ""
                else:
                    stdout, stderr = run_main(module, module_args)
            finally:
                shutil.rmtree(tmpdir, ignore_errors=True)
        data = self._parse_returned_data({"stdout": stdout, "stderr": stderr, "rc": 0}, PROFILE)
        remove_internal_keys(data)
        for stream in ("stdout", "stderr"):  # as ActionBase._execute_module does
            if stream in data and stream + "_lines" not in data:
                data[stream + "_lines"] = (data.get(stream) or "").splitlines()
        return merge_hash(result, data)
