# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Where a module of the collection runs: in the controller's worker process when the task runs on
the controller anyway, else shipped to its host as any module is.

Why: every module of the collection talks to CloudStack and Kubernetes over HTTP, and nearly always
from the controller (``delegate_to: localhost``). Shipped, each run pays for a new Python, the
AnsiballZ payload and the import of ``kubernetes``, ``cs`` and the collection's own code: about
0.5 s a run, once per batch of a rollout. Run here, the imports were made once, before
the worker was forked (the linear strategy loads an action's class in the controller to read its
attributes), and a run starts at once.

It runs here only when that changes nothing but the time: a ``local`` connection (the module would
run on this machine), no become (it would run as another user), no async (Ansible's async wrapper
is for shipped modules), and ``cs`` and ``kubernetes`` importable in this Python (a localhost with
another interpreter that has them still gets the module shipped to it). The task's ``environment``
is applied to this process while the module runs, as it would be to the module's. Everything else
is shipped unchanged: a module delegated to a bastion host runs there.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Iterator, Mapping, Optional

from ansible import constants as C
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash

from ansible_collections.cloudstack.cks.plugins.module_utils.ansible_module import libraries_present
from ansible_collections.cloudstack.cks.plugins.plugin_utils.controller_module import ControllerModule, ModuleResult

display = Display()


@contextmanager
def environment(values: Mapping[str, Any]) -> Iterator[None]:
    """This process's environment with ``values`` set, restored afterwards."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update({name: str(value) for name, value in values.items()})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class InProcessModuleAction(ActionBase):
    """The action of one module of the collection (``MODULE``: the module file, imported)."""

    MODULE: ModuleType
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = True

    def run(self, tmp: Optional[str] = None, task_vars: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp  # unused, as ActionBase.run says
        why_shipped = self.why_shipped()
        if why_shipped:
            display.vvv(f"{self._task.action}: shipped as a module ({why_shipped})")
            return self._shipped(result, task_vars)
        display.vvv(f"{self._task.action}: run in the controller's worker")
        values: dict[str, Any] = {}
        self._compute_environment_string(values)
        with environment(values):
            return merge_hash(result, self._run_here(self._invocation_wanted(task_vars)))

    @staticmethod
    def _invocation_wanted(task_vars: Optional[dict[str, Any]]) -> bool:
        """ansible-core 2.21's INJECT_INVOCATION (default false); before it, a module always returned its invocation."""
        if "INJECT_INVOCATION" not in C.config.get_configuration_definitions():
            return True
        return bool(C.config.get_config_value("INJECT_INVOCATION", variables=task_vars or {}))

    def why_shipped(self) -> str:
        """Why the module cannot run here ("" where it would run on this machine, as this user, in the
        foreground, with the libraries it needs)."""
        transport = getattr(self._connection, "transport", None)
        if transport != "local":
            return f"connection {transport}"
        if self._play_context.become:
            return "become"
        if self._task.async_val:
            return "async"
        if not libraries_present():
            return "cs or kubernetes is not installed in the controller's Python"
        return ""

    def _run_here(self, invocation: bool) -> dict[str, Any]:
        name = self._task.action
        try:
            module = ControllerModule(name, dict(self._task.args), check_mode=bool(self._task.check_mode),
                                      diff=bool(self._task.diff), invocation=invocation, **self.MODULE.module_options())
            self.MODULE.run(module)
        except ModuleResult as done:
            return done.result
        return {"failed": True, "msg": f"{name} ended without a result"}

    def _shipped(self, result: dict[str, Any], task_vars: Optional[dict[str, Any]]) -> dict[str, Any]:
        # As ansible.builtin.normal runs a module.
        wrap_async = bool(self._task.async_val) and not self._connection.has_native_async
        result = merge_hash(result, self._execute_module(task_vars=task_vars, wrap_async=wrap_async))
        if not wrap_async:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
