# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``variable_type_errors`` filter: each given role variable whose value its argument spec's type
refuses, named with the type expected. The role's own check (validate_argument_spec) refuses the same
values, but prints the role's whole argument spec with them, which buries the one line that matters."""

from __future__ import annotations

DOCUMENTATION = r"""
name: variable_type_errors
short_description: The given variables whose value the role's argument spec refuses, with the type expected
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.rollout) playbook before it includes the C(cloudstack.cks.rollout) role.
  - Checks each variable of the input that the role's entry point (O(entry_point)) declares, with the same
    conversions as the role's own argument check (a number as text passes as a number, C(yes) as a bool).
  - Values of variables the spec marks no_log are never shown.
options:
  _input:
    description: The variables given, by name.
    type: dict
    required: true
  entry_point:
    description: The entry point of the role's C(meta/argument_specs.yml) whose options are checked.
    type: str
    default: plan
"""

EXAMPLES = r"""
- name: Check the type of each rollout variable given
  ansible.builtin.assert:
    that: type_errors | length == 0
    fail_msg: "{{ type_errors | join('; ') }}"
  vars:
    type_errors: "{{ {'rollout_max_unavailable': 'two'} | cloudstack.cks.variable_type_errors }}"
    # ["rollout_max_unavailable='two': must be an int (a whole number such as 2)"]
"""

RETURN = r"""
_value:
  description: One message per refused variable, naming it, its value and the type expected; empty when all pass.
  type: list
  elements: str
"""

import os
from collections.abc import Mapping
from typing import Any, Callable

import yaml
from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.validation import (
    check_type_bool,
    check_type_dict,
    check_type_float,
    check_type_int,
    check_type_list,
    check_type_path,
    check_type_str,
)

SPEC_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "roles", "rollout", "meta", "argument_specs.yml")

# The checkers validate_argument_spec uses, so a value passes here exactly when it passes there.
CHECKERS: dict[str, Callable[[Any], Any]] = {
    "str": check_type_str, "bool": check_type_bool, "int": check_type_int, "float": check_type_float,
    "list": check_type_list, "dict": check_type_dict, "path": check_type_path,
}

EXPECTED = {
    "str": "a str (text)",
    "bool": "a bool (true or false)",
    "int": "an int (a whole number such as 2)",
    "float": "a float (a number of seconds such as 30 or 2.5)",
    "list": "a list",
    "dict": "a dict (a mapping)",
    "path": "a path",
}


def _refusal(value: Any, kind: str) -> bool:
    checker = CHECKERS.get(kind)
    if checker is None:  # raw: the role's own tasks read it (node_settings)
        return False
    try:
        checker(value)
    except (TypeError, ValueError):
        return True
    return False


def options_of(entry_point: str, path: str = SPEC_PATH) -> Mapping[str, Any]:
    with open(path, encoding="utf-8") as handle:
        specs = (yaml.safe_load(handle) or {}).get("argument_specs") or {}
    if entry_point not in specs:
        raise AnsibleFilterError(f"the rollout role has no entry point {entry_point!r}; it has {', '.join(sorted(specs))}")
    return specs[entry_point].get("options") or {}


def type_errors(given: Mapping[str, Any], options: Mapping[str, Any]) -> list[str]:
    """What is wrong with each given variable's type, in the spec's order."""
    errors = []
    for name, spec in options.items():
        if name not in given or given[name] is None:
            continue
        value = given[name]
        shown = "(hidden)" if spec.get("no_log") else repr(value)
        kind = str(spec.get("type", "str"))
        if _refusal(value, kind):
            errors.append(f"{name}={shown}: must be {EXPECTED.get(kind, kind)}")
            continue
        elements = spec.get("elements")
        if kind == "list" and elements:
            bad = [item for item in check_type_list(value) if _refusal(item, str(elements))]
            if bad:
                items = "(hidden)" if spec.get("no_log") else ", ".join(repr(item) for item in bad)
                errors.append(f"{name}: each item must be {EXPECTED.get(str(elements), elements)}; not {items}")
    return errors


def variable_type_errors(given: Mapping[str, Any], entry_point: str = "plan") -> list[str]:
    if not isinstance(given, Mapping):
        raise AnsibleFilterError(f"variable_type_errors: the input must be the variables by name, not {type(given).__name__}")
    return type_errors(given, options_of(entry_point))


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"variable_type_errors": variable_type_errors}
