#!/usr/bin/python
# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: cks_fleet_rollout
short_description: Roll one cluster of a fleet as its own rollout run
version_added: 0.1.0
description:
  - Used by the C(cloudstack.cks.fleet) playbook, once per cluster (a host of the inventory). Runs the
    collection's rollout playbook (C(cloudstack.cks.rollout)) for O(cluster) as an C(ansible-playbook) run of its
    own, with the variables in O(rollout_vars), and reports how it ended. The cluster's lock, plan, batches and
    release are those of one rollout; a failure stays within that run, so the other clusters go on.
  - Before it starts, the outcomes already written in O(fleet_dir) are counted; once O(max_failed) clusters of this
    fleet run failed, the cluster is not started (outcome V(not_started)) and nothing of it is touched.
  - 'Outcomes: V(rolled) (nodes were restarted), V(up_to_date) (the plan found nothing out of date), V(cancelled),
    V(failed), V(locked) (another rollout, for example a second job slice handed the same cluster, holds its lock;
    nothing was changed) and V(not_started).'
  - The module itself does not fail when the rollout does (the fleet goes on); its return value C(rollout_failed) says so.
  - In check mode (C(--check), or the fleet's C(fleet_dry_run)) the cluster's run is the rollout's own dry run, which
    takes no lock, stores nothing and touches no node; the outcome is V(would_roll) or V(up_to_date) and RV(plan) says
    what would be rolled.
  - 'When the fleet''s job is cancelled while the rollout runs - SIGTERM or SIGINT (an AWX cancel, Ctrl-C), or the
    C(ansible-playbook) above this module killed (ansible-runner sends its process group SIGKILL on a cancel) - the
    rollout is asked to stop as C(cloudstack.cks.cancel) asks, for this fleet run''s lock holder only: the batch in
    progress finishes, the release runs. If it has not ended O(cancel_timeout) seconds later it is stopped (SIGTERM to
    its process group, SIGKILL a minute later). Its outcome is then V(cancelled), and the fleet report is written
    from the outcomes in O(fleet_dir), since the fleet''s last play does not run. Run the fleet again to resume.'
  - Each cluster's folder in O(fleet_dir) keeps the run's log (the C(json) callback's output) and its rollout report.
    The variables are written there for the run only (mode 0600) and removed when it ends.
author:
  - cloudstack.cks contributors (@cloudstack-cks)
attributes:
  check_mode:
    support: full
    description: A dry run of a fleet is the rollout's own dry run, per cluster (C(cloudstack.cks.rollout) with C(--check)).
  diff_mode:
    support: none
    description: Nothing to show as a diff.
options:
  cluster:
    description: The CKS cluster, by id or by exact name (the rollout's C(rollout_cluster)).
    type: str
    required: true
  name:
    description: The cluster's name in the fleet report and its folder (the inventory host); by default O(cluster).
    type: str
  run_id:
    description:
      - The fleet run's name, given to the rollout as C(rollout_run_id); it is the holder of the cluster's lock while
        its rollout runs, so an overlapping run is told who holds it.
    type: str
    required: true
  fleet_dir:
    description: The fleet run's folder (it must exist); one folder per cluster is made in it.
    type: path
    required: true
  playbook:
    description: The rollout playbook to run (the collection's C(playbooks/rollout.yml)).
    type: path
    required: true
  python:
    description: The Python to run C(ansible-playbook) with (C(python -m ansible.cli.playbook)); by default the module's own.
    type: path
  collections_path:
    description: A collections folder put first in the run's C(ANSIBLE_COLLECTIONS_PATH), so it uses this same collection.
    type: path
  rollout_vars:
    description:
      - The rollout's variables for this cluster (C(rollout_node_offerings), C(rollout_max_unavailable), ...), without
        C(rollout_cluster), C(rollout_report_path) and C(rollout_run_id), which this module sets.
      - The values of C(rollout_api_key), C(rollout_api_secret) and C(rollout_kubeconfig) are hidden from the output.
    type: dict
    default: {}
  max_failed:
    description: Do not start once this many clusters of this fleet run have failed; V(0) means no limit.
    type: int
    default: 0
  timeout:
    description: Seconds the rollout may run before it is stopped (SIGTERM) and counted as failed; V(0) means no limit.
    type: int
    default: 0
  cancel_timeout:
    description: Seconds a rollout may go on after the fleet's job was cancelled before it is stopped.
    type: int
    default: 600
  api_rate:
    description:
      - The API calls a second the fleet's CloudStack account may make (its C(api.throttling.max) divided by
        C(api.throttling.interval)). Each rollout keeps to its share, nine tenths of it divided by O(parallel), so that the
        clusters rolled at once do not keep the account at its limit for everyone else who shares it.
      - The share reaches the rollout as E(CLOUDSTACK_API_RATE). Without it, each rollout's calls go at once until the
        rate limit refuses one, and then keep a pace learnt from the refusal.
    type: float
  parallel:
    description: How many clusters the fleet rolls at once (C(fleet_parallel)), the clusters sharing O(api_rate).
    type: int
    default: 1
  cancel_playbook:
    description: The cancel playbook (the collection's C(playbooks/cancel.yml)); by default the one next to O(playbook).
    type: path
  fleet_report_path:
    description:
      - Where the fleet report is written when the fleet's job was cancelled; by default C(fleet-report.json) in O(fleet_dir)
        (the file the fleet's last play writes at a normal end).
      - After a cancel, each cluster that ends rewrites it with the outcomes of every cluster that ended so far, under a lock
        in O(fleet_dir), so the report left holds every cluster that ended, however close together they ended.
    type: path
  fleet_started:
    description: When the fleet run started (UTC, RFC 3339), the C(started) of the fleet report written after a cancel.
    type: str
  cwd:
    description: The folder the rollout runs in (relative hook paths are taken from it); by default the folder C(ansible-playbook) runs in.
    type: path
notes:
  - The connection (C(CLOUDSTACK_*), C(K8S_AUTH_*)) reaches the rollout through the environment, as an AWX credential
    sets it, or through O(rollout_vars) (C(rollout_api_url), ...).
"""

EXAMPLES = r"""
- name: Roll one cluster of the fleet
  cloudstack.cks.cks_fleet_rollout:
    cluster: customer-a-k8s
    run_id: fleet-20261203T120000-1
    fleet_dir: /var/tmp/fleet-20261203T120000-1
    playbook: "{{ playbook_dir }}/rollout.yml"
    rollout_vars:
      rollout_node_offerings:
        worker: cks-large
    max_failed: 2
  register: fleet_cluster
"""

RETURN = r"""
cluster:
  description: The cluster's name (O(name), else O(cluster)).
  type: str
  returned: always
cluster_id:
  description: The cluster as given in O(cluster).
  type: str
  returned: always
outcome:
  description: How the cluster's rollout ended.
  type: str
  returned: always
  sample: rolled
nodes_restarted:
  description: The nodes the rollout restarted.
  type: list
  elements: str
  returned: always
last_error:
  description: Why it failed, was skipped or was not started; V(null) when it ended well.
  type: str
  returned: always
locked_by:
  description: With outcome V(locked), the holder of the cluster's lock.
  type: str
  returned: always
cluster_state:
  description: The state the rollout left the cluster in (V(Running), V(Alert)), from its report.
  type: str
  returned: always
still_out_of_date:
  description: Nodes still out of date after the rollout, from its report.
  type: int
  returned: always
started:
  description: When the cluster's turn began (UTC, RFC 3339).
  type: str
  returned: always
ended:
  description: When it ended (UTC, RFC 3339).
  type: str
  returned: always
seconds:
  description: How long it took.
  type: float
  returned: always
report_path:
  description: The cluster's rollout report, if one was written.
  type: str
  returned: always
log_path:
  description: The rollout run's output (JSON), if it ran.
  type: str
  returned: always
plan:
  description:
    - In check mode, what the dry run planned - C(out_of_date) (per node type, how many nodes are out of date) and
      C(batches) (in order, each with its C(node_type) and C(nodes)); V(null) otherwise.
  type: dict
  returned: always
  sample: {"out_of_date": {"control": 0, "etcd": 0, "worker": 2}, "batches": [{"node_type": "worker", "nodes": ["w1"]}]}
rollout_failed:
  description: Whether the cluster's rollout failed (outcome V(failed)).
  type: bool
  returned: always
"""

import sys
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.playbook import PlaybookRunner
from ansible_collections.cloudstack.cks.plugins.module_utils._services.fleet import roll_cluster
from ansible_collections.cloudstack.cks.plugins.module_utils.ansible_module import run

SECRET_VARS = ("rollout_api_key", "rollout_api_secret", "rollout_kubeconfig")


def argument_spec() -> dict[str, dict[str, Any]]:
    return {
        "cluster": {"type": "str", "required": True},
        "name": {"type": "str"},
        "run_id": {"type": "str", "required": True},
        "fleet_dir": {"type": "path", "required": True},
        "playbook": {"type": "path", "required": True},
        "python": {"type": "path"},
        "collections_path": {"type": "path"},
        "rollout_vars": {"type": "dict", "default": {}, "no_log": False},
        "max_failed": {"type": "int", "default": 0},
        "timeout": {"type": "int", "default": 0},
        "cancel_timeout": {"type": "int", "default": 600},
        "api_rate": {"type": "float"},
        "parallel": {"type": "int", "default": 1},
        "cancel_playbook": {"type": "path"},
        "fleet_report_path": {"type": "path"},
        "fleet_started": {"type": "str"},
        "cwd": {"type": "path"},
    }


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    # Only the secrets: hiding every value of the dict would also mask "1" or "true" all through the output.
    for secret in SECRET_VARS:
        value = (module.params["rollout_vars"] or {}).get(secret)
        if isinstance(value, str) and value:
            module.no_log_values.add(value)
    runner = PlaybookRunner(module.params["python"] or sys.executable, module.params["collections_path"])
    run(module, lambda: roll_cluster(dict(module.params, check_mode=module.check_mode), runner))


if __name__ == "__main__":
    main()
