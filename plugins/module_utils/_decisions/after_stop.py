# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""What a node's cycle does when CloudStack refuses a change after the VM was stopped. Pure.

The checks before the drain catch what they can; a refusal that still comes (another operator
changed a limit, an offering was disabled meanwhile, a fault) would otherwise leave a drained
node Stopped until someone looks. CloudStack answers a refusal with an ``ApiErrorCode``: the 4xx
(``PARAM_ERROR`` 431, ``UNSUPPORTED_ACTION_ERROR`` 432, ...) and the 53x (``INTERNAL_ERROR`` 530,
``ACCOUNT_ERROR`` 531, ``INSUFFICIENT_CAPACITY_ERROR`` 533, ``RESOURCE_ALLOCATION_ERROR`` 535, ...).
A change that did not answer at all (a deadline, a lost answer) is no refusal: it may still be
carried out, so the VM is left alone for the rerun to settle.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

#: The steps that change a Stopped VM: a refusal of one of them puts the node back.
CHANGE_STEPS = frozenset({"change_offering", "resize_root_disk", "update_affinity_groups"})


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
