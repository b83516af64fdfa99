# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""The typed errors of the collection.

module_utils raise these; each module turns them into ``fail_json`` in one place
(``ansible_module.run``). The message is what the operator reads: it names the node, pod, PDB,
command or parameter at fault and, where it can, what to change. Secrets never go in.
"""

from __future__ import annotations

from typing import Any, Optional


class CksError(Exception):
    """Base class. ``details`` is a JSON-able dict returned next to ``msg``."""

    def __init__(self, msg: str, **details: Any) -> None:
        super().__init__(msg)
        self.msg = msg
        self.details = details


class InvalidInput(CksError):
    """The operator asked for something that cannot be done; nothing was changed."""

    def __init__(self, parameter: str, value: Any, why: str) -> None:
        super().__init__(f"{parameter}={value!r}: {why}", parameter=parameter, value=value)
        self.parameter = parameter
        self.value = value


class CloudStackError(CksError):
    """A CloudStack API call failed (HTTP error, job failure, or transport)."""

    def __init__(
        self,
        command: str,
        errortext: str,
        errorcode: Optional[int] = None,
        target: Optional[str] = None,
    ) -> None:
        where = f" on {target}" if target else ""
        code = f" (errorcode {errorcode})" if errorcode is not None else ""
        super().__init__(f"CloudStack {command}{where} failed{code}: {errortext}",
                         command=command, errorcode=errorcode, errortext=errortext, target=target)
        self.command = command
        self.errorcode = errorcode
        self.errortext = errortext


class KubernetesError(CksError):
    """A Kubernetes API call failed."""

    def __init__(self, action: str, message: str, status: Optional[int] = None, reason: Optional[str] = None) -> None:
        code = f" (HTTP {status}{' ' + reason if reason else ''})" if status else ""
        super().__init__(f"Kubernetes {action} failed{code}: {message}",
                         action=action, status=status, reason=reason)
        self.action = action
        self.status = status
        self.reason = reason


class LockHeld(CksError):
    """Another rollout holds the cluster's lock."""


class DeadlineExceeded(CksError):
    """A wait ran out of time."""


class EtcdError(CksError):
    """etcd could not be asked, or its answer means the step must not go ahead."""


class StepFailed(CksError):
    """One step of a node's cycle failed; ``node`` and ``step`` say where."""

    def __init__(self, node: str, step: str, cause: str, **details: Any) -> None:
        super().__init__(f"node {node}: {step} failed: {cause}", node=node, step=step, **details)
        self.node = node
        self.step = step
