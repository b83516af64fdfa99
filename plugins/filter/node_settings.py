# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``node_settings`` filter: a node setting as the rollout role gets it - a mapping from extra
vars or a vars file, or that mapping's JSON or YAML text from an AWX survey's text field - as the
mapping the modules take, or an error naming the variable and what to give instead."""

from __future__ import annotations

DOCUMENTATION = r"""
name: node_settings
short_description: A per-node-type setting from a mapping or its JSON or YAML text
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.rollout) role and the C(cloudstack.cks.settings) playbook for
    C(rollout_node_offerings), C(rollout_node_root_disk_sizes) and C(rollout_node_affinity_groups).
  - A mapping is returned as it is. Text is read as YAML (which reads JSON too), as an AWX survey's text field
    gives it; blank text and null are no setting, an empty mapping.
  - Anything else, text that is not YAML, or text that is no mapping fails the task with a message that
    names the variable (O(name)) and shows the shape to give.
options:
  _input:
    description: The setting as given.
    type: raw
    required: true
  name:
    description: The variable's name, for the error message.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Read the offerings as a survey gives them
  ansible.builtin.set_fact:
    offerings: "{{ 'worker: cks-large' | cloudstack.cks.node_settings('rollout_node_offerings') }}"
    # {"worker": "cks-large"}
"""

RETURN = r"""
_value:
  description: The setting per node type.
  type: dict
"""

from collections.abc import Mapping
from typing import Any

import yaml
from ansible.errors import AnsibleFilterError

EXAMPLE = '{"worker": "cks-large"}'


def _kind(value: Any) -> str:
    # Ansible 2.19 wraps values in tagged subclasses (_AnsibleTaggedInt): name the plain type the operator wrote.
    for plain, word in ((bool, "a bool"), (int, "a number"), (float, "a number"), (list, "a list"), (str, "text")):
        if isinstance(value, plain):
            return word
    return type(value).__name__


def node_settings(value: Any, name: str) -> dict[str, Any]:
    """The mapping ``value`` is, or whose JSON or YAML text it is; {} for blank text or null."""
    given = value
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            problem = " ".join(str(exc).split())
            raise AnsibleFilterError(f"{name}={given!r}: not JSON or YAML text ({problem}); give a mapping of node "
                                     f"type to its setting, e.g. {EXAMPLE}")
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise AnsibleFilterError(f"{name}={given!r}: must be a mapping of node type (control, worker, etcd) to its "
                                 f"setting, e.g. {EXAMPLE}, or that mapping as JSON or YAML text; "
                                 f"got {_kind(value)}")
    return dict(value)


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"node_settings": node_settings}
