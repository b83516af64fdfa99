# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The stand-in for AnsibleModule when one of the collection's modules runs inside the controller's
worker process (``in_process.py`` says when): the options are checked by the very validator
AnsibleModule uses (types, defaults, environment fallbacks, required_if/together, no_log values),
and the result has the shape AnsibleModule gives it (``invocation``, ``warnings``, the no_log values
removed). ``exit_json`` and ``fail_json`` end the run by raising ``ModuleResult`` instead of printing
the result and exiting the process, which is the worker here.

Only what ``module_utils.ansible_module.ModuleHost`` names is offered: the collection's modules use
nothing else of AnsibleModule (no run_command, no files, no temporary directory).
"""

from __future__ import annotations

from typing import Any, NoReturn, Optional, Sequence

from ansible.module_utils.common.arg_spec import ModuleArgumentSpecValidator
from ansible.module_utils.common.parameters import remove_values
from ansible.module_utils.errors import UnsupportedError


class ModuleResult(BaseException):
    """The module's result, raised by ``exit_json``/``fail_json``.

    A BaseException, as SystemExit is for AnsibleModule: the modules' last net (``except Exception``
    in ``ansible_module.run``) must let the result through, not report it as an unexpected error.
    """

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__("module result")
        self.result = result


class ControllerModule:
    """AnsibleModule's options and results for a module run in this process."""

    def __init__(self, name: str, args: dict[str, Any], check_mode: bool, diff: bool,
                 argument_spec: dict[str, Any], supports_check_mode: bool = False, invocation: bool = True,
                 mutually_exclusive: Optional[Sequence[Any]] = None, required_together: Optional[Sequence[Any]] = None,
                 required_one_of: Optional[Sequence[Any]] = None, required_if: Optional[Sequence[Any]] = None,
                 required_by: Optional[dict[str, Any]] = None) -> None:
        self._name = name
        self.check_mode = check_mode
        self._diff = diff
        # ansible-core 2.21 returns a module's invocation only when asked (INJECT_INVOCATION); before, always.
        self._invocation = invocation
        self.no_log_values: set[str] = set()
        self._warnings: list[str] = []
        # The task's arguments. Ansible's own (_ansible_*) are added only to a shipped module's payload;
        # dropped here should one ever come along, as AnsibleModule takes them out of its params.
        self.params: dict[str, Any] = {k: v for k, v in args.items() if not k.startswith("_ansible_")}
        validator = ModuleArgumentSpecValidator(argument_spec, mutually_exclusive, required_together,
                                                required_one_of, required_if, required_by)
        validation = validator.validate(self.params)
        self.params.update(validation.validated_parameters)
        self.no_log_values.update(validation._no_log_values)  # pylint: disable=protected-access
        # The errors object has no length to test: its first item, as AnsibleModule looks.
        error = next(iter(validation.errors.errors), None)
        if error is not None:
            msg = validation.errors.msg
            if isinstance(error, UnsupportedError):
                msg = f"Unsupported parameters for ({name}) module: {msg}"
            self.fail_json(msg=msg)
        if check_mode and not supports_check_mode:
            self.exit_json(skipped=True, msg=f"remote module ({name}) does not support check mode")

    def warn(self, warning: str) -> None:
        self._warnings.append(str(warning))

    def exit_json(self, **kwargs: Any) -> NoReturn:
        raise ModuleResult(self._formatted(kwargs))

    def fail_json(self, msg: str, **kwargs: Any) -> NoReturn:
        kwargs.update(failed=True, msg=str(msg))
        raise ModuleResult(self._formatted(kwargs))

    def _formatted(self, result: dict[str, Any]) -> dict[str, Any]:
        if self._invocation:
            result.setdefault("invocation", {"module_args": self.params})
        else:
            result.pop("invocation", None)
        result.setdefault("changed", False)
        if self._warnings:
            result["warnings"] = list(self._warnings)
        return remove_values(result, self.no_log_values)
