# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The ``rollout_run_id`` filter: the run id a rollout holds the lock as.

Thin: the naming is ``_decisions/holder.py``'s ``run_id``, unit-tested there; this reads the clock
and draws the random part.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_run_id
short_description: The run id a rollout holds its lock as
version_added: 0.1.0
author:
  - cloudstack.cks contributors (@cloudstack-cks)
description:
  - Used by the C(cloudstack.cks.rollout) role before it takes the lock. Returns the input when it is a non-empty
    run id (the operator's C(rollout_run_id)); else, under AWX, C(awx-job-<id>) from O(awx_job_id), so the lock's
    holder, the report and C(status) point at the job; else C(rollout-<UTC start time>-<random number>).
options:
  _input:
    description: The run id given, or V("") for none.
    type: raw
    required: true
  awx_job_id:
    description: The AWX job's id (AWX sets C(awx_job_id) in every job's extra vars), or V("") outside AWX.
    type: raw
"""

EXAMPLES = r"""
- name: Name this rollout run
  ansible.builtin.set_fact:
    rollout_run_id: "{{ rollout_run_id | default('') | cloudstack.cks.rollout_run_id(awx_job_id=awx_job_id | default('')) }}"
"""

RETURN = r"""
_value:
  description: The run id.
  type: str
"""

import random
from datetime import datetime, timezone
from typing import Any

from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.holder import run_id


def rollout_run_id(given: Any, awx_job_id: Any = None) -> str:
    """The run id given, the AWX job's, or a new one from the clock and a random number."""
    return run_id(given, awx_job_id, datetime.now(timezone.utc), random.SystemRandom().randrange(2 ** 31))


class FilterModule:
    """cloudstack.cks filters."""

    def filters(self) -> dict[str, Any]:
        return {"rollout_run_id": rollout_run_id}
