# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

"""One ``ansible-playbook`` run of the collection's rollout playbook, as a process of its own.

A fleet rolls each cluster as its own run so that a cluster's failure, its facts, its
``rollout_nodes`` group and its batches stay its own: the rollout playbook runs unchanged.
Its output is the usual one (kept as the cluster's log); the collection's ``rollout_failures``
callback writes its failed tasks to a JSON file, so how it ended is read, not guessed from text.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

# What the parent's job set up for its own events (AWX / ansible-runner): a child writing its
# events there would mix them into the parent's job, so the child gets none of it.
PARENT_ONLY_ENV = ("ANSIBLE_CALLBACK_PLUGINS", "ANSIBLE_CALLBACKS_ENABLED", "ANSIBLE_CALLBACK_WHITELIST",
                   "AWX_ISOLATED_DATA_DIR", "RUNNER_OMIT_EVENTS", "RUNNER_ONLY_FAILED_EVENTS")


@dataclass
class PlaybookRun:
    rc: int
    output: Mapping[str, Any]
    timed_out: bool = False


class PlaybookRunner:
    """Runs a playbook with ``python -m ansible.cli.playbook`` (the same Ansible as the caller)."""

    def __init__(self, python: str, collections_path: Optional[str] = None) -> None:
        self.python = python
        self.collections_path = collections_path

    def environment(self) -> dict[str, str]:
        env = {name: value for name, value in os.environ.items() if name not in PARENT_ONLY_ENV}
        env["ANSIBLE_STDOUT_CALLBACK"] = "ansible.builtin.default"
        env["ANSIBLE_CALLBACKS_ENABLED"] = "cloudstack.cks.rollout_failures"
        env["ANSIBLE_RETRY_FILES_ENABLED"] = "0"
        env["ANSIBLE_NOCOLOR"] = "1"
        if self.collections_path:
            current = env.get("ANSIBLE_COLLECTIONS_PATH") or env.get("ANSIBLE_COLLECTIONS_PATHS") or ""
            env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(p for p in (self.collections_path, current) if p)
            env.pop("ANSIBLE_COLLECTIONS_PATHS", None)
        return env

    def run(self, playbook: str, vars_path: str, log_path: str, failures_path: str, cwd: str,
            timeout: Optional[float] = None, extra_args: Sequence[str] = ()) -> PlaybookRun:
        """Run to the end (or ``timeout`` seconds); its output goes to ``log_path``."""
        # "-i ," is an inventory of no hosts: the rollout's plays run on the implicit localhost
        # and on the nodes its plan adds, never on hosts of an inventory found by default.
        command = [self.python, "-m", "ansible.cli.playbook", playbook, "-i", ",", "-e", f"@{vars_path}", *extra_args]
        timed_out = False
        with open(log_path, "w", encoding="utf-8") as log:
            env = dict(self.environment(), CKS_ROLLOUT_FAILURES_PATH=failures_path)
            # Not AnsibleModule.run_command: the run's output must go to its log file as it comes (a
            # rollout runs for an hour), in a session of its own, and be stopped at the fleet's timeout.
            proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,  # pylint: disable=ansible-bad-function
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                rc = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                # SIGTERM first: ansible-playbook then ends its current task and exits, so the next run can resume.
                proc.terminate()
                try:
                    rc = proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    rc = proc.wait()
                timed_out = True
        return PlaybookRun(rc, read_failures(failures_path), timed_out)


def read_failures(path: str) -> Mapping[str, Any]:
    """What the rollout_failures callback wrote ({} when the run ended before it could)."""
    try:
        with open(path, encoding="utf-8") as fh:
            found = json.load(fh)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
