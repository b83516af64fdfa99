# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""What a node's cycle does when CloudStack refuses a change after the VM was stopped, or refuses
to start it once changed. Pure.

The checks before the drain catch what they can; a refusal that still comes (another operator
changed a limit, an offering was disabled meanwhile, a fault) would otherwise leave a drained
node Stopped until someone looks. CloudStack answers a refusal with an ``ApiErrorCode``: the 4xx
(``PARAM_ERROR`` 431, ``UNSUPPORTED_ACTION_ERROR`` 432, ...) and the 53x (``INTERNAL_ERROR`` 530,
``ACCOUNT_ERROR`` 531, ``INSUFFICIENT_CAPACITY_ERROR`` 533, ``RESOURCE_ALLOCATION_ERROR`` 535, ...).
A change that did not answer at all (a deadline, a lost answer) is no refusal: it may still be
carried out, so the VM is left alone for the rerun to settle.

A start refused after a change is the deployment planner's answer: ``DeploymentPlanningManagerImpl``
found no host for the VM as it is now (533 ``INSUFFICIENT_CAPACITY_ERROR``, "Unable to create a
deployment for ..."; a planner's own exception ends the job 530, a permission one 531). The changes it
may be refusing are the ones it plans with, its affinity groups (the strict groups' avoid sets) and its
offering (the capacity each host must have), so those are undone before the node is started on what
it had; a grown root disk is no part of the plan and stays grown.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

#: The steps that change a Stopped VM: a refusal of one of them puts the node back.
CHANGE_STEPS = frozenset({"change_offering", "resize_root_disk", "update_affinity_groups"})


#: The start's answers that are the deployment planner's refusal (see the module's docstring).
PLANNER_CODES = frozenset({530, 531, 533})

#: The changes the planner plans with, in the order they are undone, and how an operator calls them.
PLANNED_CHANGES = (("update_affinity_groups", "affinity groups"), ("change_offering", "offering"))


def is_refusal(errorcode: Optional[int]) -> bool:
    """Whether CloudStack's ``errorcode`` says it refused the command (it did not just fail to answer)."""
    if errorcode is None or isinstance(errorcode, bool):
        return False
    return 400 <= int(errorcode) < 500 or 530 <= int(errorcode) < 540


def refused_after_stop(step: str, details: Mapping[str, Any]) -> bool:
    """Whether a failed ``step`` (with the answer in ``details``) is a change CloudStack refused."""
    return step in CHANGE_STEPS and is_refusal(details.get("errorcode"))


def put_back_cause(refusal: str, put_back: Optional[str], uncordoned: bool) -> str:
    """The batch's error after a refusal: CloudStack's answer first, then where the node is now.

    ``put_back``: None when it was put back; else why it could not be (it is then left as it is,
    cordoned, for the rerun).
    """
    if put_back is None:
        where = "uncordoned" if uncordoned else "left cordoned (cordoned by someone else before the rollout)"
        return (f"{refusal}; the node was started again on what it has now, is back (Ready with a new boot ID) "
                f"and {where}; it stays out of date and the next run retries it")
    return f"{refusal}; putting the node back failed too, so it is left as it is for the rerun: {put_back}"


def start_refused_after_change(step: str, details: Mapping[str, Any], changed: Sequence[str]) -> bool:
    """Whether a failed start is the planner refusing the VM as changed by ``changed`` (this cycle's
    change steps that went through): only then is there something to undo."""
    code = details.get("errorcode")
    if step != "start" or isinstance(code, bool) or code is None or int(code) not in PLANNER_CODES:
        return False
    return any(name in changed for name, _words in PLANNED_CHANGES)


def to_undo(changed: Sequence[str]) -> list[str]:
    """The change steps to undo after a refused start, groups first: a grown disk stays grown."""
    return [name for name, _words in PLANNED_CHANGES if name in changed]


def start_refusal_cause(refusal: str, undone: Sequence[str], put_back: Optional[str], uncordoned: bool) -> str:
    """The batch's error after a refused start: what the planner could not place, what was undone,
    where the node is now and what to change before the next run."""
    words = " and ".join(w for name, w in PLANNED_CHANGES if name in undone) or "changes"
    head = (f"CloudStack's deployment planner could not place the node with its new {words} ({refusal}): "
            "the strict affinity groups it was given may have no host left for it, or no host has room for its "
            "offering")
    change = ("add Up and Enabled hosts (or take one out of Maintenance), use a non-strict affinity group or a "
              "smaller offering, then run the rollout again")
    if put_back is None:
        where = "uncordoned" if uncordoned else "left cordoned (cordoned by someone else before the rollout)"
        return (f"{head}; its previous {words} were restored, it was started again on them, is back (Ready with a "
                f"new boot ID) and {where}; it stays out of date: {change}")
    return f"{head}; putting the node back failed too, so it is left as it is for the rerun: {put_back}; {change}"
