#!/usr/bin/python
# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: cks_node_settings
short_description: Store the per-node-type settings of a CKS cluster, or start or cancel a rollout of them
version_added: 0.1.0
description:
  - Sets, for each node type of a CloudStack Kubernetes Service (CKS) cluster (V(control), V(worker), V(etcd)),
    the service offering, the root disk size and the affinity groups its nodes should have, and stores them in
    the cluster's rollout record, the ConfigMap C(kube-system/cloudstack-cks-rollout).
  - Nodes are not touched. With O(rollout=false) (the default) the settings are only stored; the nodes that
    differ show up in M(cloudstack.cks.cks_node_outdated) and are restarted with them by a rollout
    (the C(cloudstack.cks.rollout) role).
  - With O(rollout=true) the settings are validated as a rollout needs them, the cluster's rollout lock (the
    Lease C(kube-system/cloudstack-cks-rollout), our "Updating" state) is taken for O(lock_holder), and the
    settings are stored. The rollout itself is the role's. If storing fails after the lock was taken, the lock
    is released again and the failure is kept as the record's last error.
  - With O(plan=true) (and O(rollout=true)) this one run starts the rollout, as the C(cloudstack.cks.rollout) role
    does - in this order - refuse before the lock (the etcd checks the plan would need and cannot make, the
    changes CloudStack would refuse only once a node is stopped, the commands the API key may not call; the message
    then starts with "Refused before the lock"), store the settings and take the lock, plan (everything
    M(cloudstack.cks.cks_node_outdated) returns, judged against the settings just stored), and with O(taint_pending)
    taint the planned nodes (see O(plan)).
  - With O(cancel_rollout=true) the cancel flag is set in the record; a running rollout stops between two batches.
  - On first use on a cluster whose node types have no settings of their own, each type first gets the
    cluster's own ones copied - the per-type offering CloudStack reports, else the cluster's service offering;
    the smallest root disk of its nodes; the affinity groups all its nodes share - so changing one type leaves
    the others as they are. Node templates are never copied or changed.
  - Settings are stored in any CKS state except while a CKS operation runs (V(Starting), V(Stopping), V(Scaling),
    V(ScalingStoppedCluster), V(Upgrading), V(Importing), V(RemovingNodes), V(Recovering), V(Destroying),
    V(Destroyed)) and except while a rollout holds the lock.
  - Anything refused fails the task with a message naming the parameter and the value, and nothing is written.
  - B(Our record is the source of truth.) CloudStack's own per-type offerings of the cluster
    (C(controlofferingid), C(workerofferingid), C(etcdofferingid)), and its CPU and memory totals, go stale -
    no API lets anything outside CloudStack update them. The workers a later CKS scale-up adds therefore get
    CKS's stored worker offering, the cluster's one root disk size and only the dedication group; they then
    show up as out of date, and the next rollout restarts them with the stored ones.
author:
  - cloudstack.cks contributors (@cloudstack-cks)
extends_documentation_fragment:
  - cloudstack.cks.cluster
  - cloudstack.cks.cloudstack
  - cloudstack.cks.kubernetes
  - cloudstack.cks.etcd
attributes:
  check_mode:
    support: full
    description: Everything is read and validated; nothing is written and the lock is not taken.
  diff_mode:
    support: full
    description: Shows the settings of each node type before and after, with names next to the ids.
  idempotent:
    support: full
    description: Storing the same settings again reports no change (O(rollout=true) always takes the lock).
options:
  node_offerings:
    description:
      - The service offering of each node type, by name or id, keyed by node type (V(control), V(worker), V(etcd)).
      - A node type left out (or given as null) keeps its offering. A key that is not a node type is refused.
      - An unknown name, a name that several offerings share, a custom (dynamic) offering and an offering with
        less than 2 CPUs or 2048 MB are refused.
      - With O(rollout=true), an offering whose disk offering strictness differs from the nodes' current
        offering is refused too (CloudStack would refuse the change with the node stopped).
    type: dict
    suboptions:
      control:
        description: The control nodes' offering.
        type: str
      worker:
        description: The workers' offering.
        type: str
      etcd:
        description: The external etcd nodes' offering.
        type: str
  node_root_disk_sizes:
    description:
      - The root disk size in GB of each node type, keyed by node type. Left out, a type keeps its size.
      - A node is out of date when its root disk is smaller; a rollout grows it (root disks only grow).
      - With O(rollout=true) a size that would shrink an existing node's disk is refused, and so is a size
        change of a disk whose offering fixes its size (a strict disk offering, or a service offering with a
        root disk size). With O(rollout=false) any size from 1 GB is stored, as C(createKubernetesCluster) accepts it.
    type: dict
    suboptions:
      control:
        description: The control nodes' root disk size in GB.
        type: int
      worker:
        description: The workers' root disk size in GB.
        type: int
      etcd:
        description: The external etcd nodes' root disk size in GB.
        type: int
  node_affinity_groups:
    description:
      - The affinity groups of each node type, by name or id, keyed by node type. Left out, a type keeps its groups.
      - The list replaces the type's recorded groups. An empty list records "no groups" - a rollout then removes
        the nodes' groups. A type with no recorded groups at all (nothing shared on first use) leaves the nodes'
        groups as they are.
      - ExplicitDedication groups are refused - CKS adds the account's dedication group to every node by itself,
        and a rollout always keeps it. Unknown names and names several groups share are refused.
    type: dict
    suboptions:
      control:
        description: The control nodes' affinity groups.
        type: list
        elements: str
      worker:
        description: The workers' affinity groups.
        type: list
        elements: str
      etcd:
        description: The external etcd nodes' affinity groups.
        type: list
        elements: str
  rollout:
    description:
      - Also validate the settings for a rollout and take the cluster's rollout lock for O(lock_holder).
      - Refused unless the CKS state is V(Running) or V(Alert).
      - Refused if the settings would make a running, up-to-date node of a type that cannot lose a node out of
        date (a single control node, a 2-node stacked control plane, 2 etcd nodes). No-op settings, nodes that
        differ already and stopped nodes are accepted.
    type: bool
    default: false
  plan:
    description:
      - With O(rollout=true), also refuse before the lock what a rollout could not do, and after taking the lock
        return the rollout's plan (see the description), in one run. Refused without O(rollout=true).
      - If planning fails after the lock was taken, the rollout is released (the lock given back, any pending taint
        taken off) with why as the record's last error.
      - In check mode nothing is stored and the lock is only read; the plan is made, with O(drain_check) what would
        block each drain.
      - The etcd options (O(etcd_endpoints), ...) say how etcd is asked, as for M(cloudstack.cks.cks_node_outdated).
    type: bool
    default: false
  select:
    description:
      - With O(plan=true), a JMESPath expression limiting the batches, as
        O(cloudstack.cks.cks_node_outdated#module:select).
    type: str
  restart:
    description:
      - With O(plan=true), which nodes the plan restarts (V(selected) and V(all) also restart nodes with no
        change), as O(cloudstack.cks.cks_node_outdated#module:restart).
      - A restart that resumes no round records its round in the rollout record once the lock is held (each node's
        boot ID then), so that a rerun after this run is killed, fails or is cancelled restarts only the nodes not
        booted since; the release of a rollout that ran every batch ends the round.
    type: str
    choices: [outdated, selected, all]
    default: outdated
  canary:
    description:
      - With O(plan=true), restart the first worker of the plan alone first, as
        O(cloudstack.cks.cks_node_outdated#module:canary).
    type: bool
    default: false
  live_scale:
    description:
      - With O(plan=true), each planned node's path under C(rollout_live_scale=auto), as
        O(cloudstack.cks.cks_node_outdated#module:live_scale).
      - With O(live_scale=auto), a node whose live path adds vCPUs depends on how many vCPUs its running domain
        was started with room for, which CloudStack does not show (the domain's maximum is written at the VM's last
        start, from that release and its C(kvm.cpu.dynamic.scaling.capacity)). Before the lock the plan asks the guest
        (the live path's pod on the node, O(live_scale_image), reading C(/sys/devices/system/cpu/possible), deleted
        afterwards); a domain without room takes the restart path, with why. Not in check mode (no pod is created);
        the path then says C(headroom checked before the scale).
    type: str
    choices: [never, auto]
    default: never
  live_scale_image:
    description:
      - With O(plan=true) and O(live_scale=auto), the image of the pod that asks a guest for its headroom, as
        O(cloudstack.cks.cks_node_cycle#module:live_scale_image).
    type: str
    default: busybox:1.36.1
  drain_check:
    description:
      - With O(plan=true), also tell what would block the drain of each planned node now
        (RV(cloudstack.cks.cks_node_outdated#module:drain_blockers)), as
        O(cloudstack.cks.cks_node_outdated#module:drain_check); the role asks for it in a dry run.
    type: bool
    default: false
  delete_emptydir_data:
    description:
      - With O(drain_check), whether the drain would evict pods with emptyDir volumes.
    type: bool
    default: true
  force:
    description:
      - With O(drain_check), whether the drain would evict pods without a controller.
    type: bool
    default: false
  taint_pending:
    description:
      - With O(plan=true), put the C(PreferNoSchedule) pending taint on the planned Kubernetes nodes once the lock
        is taken, as M(cloudstack.cks.cks_node_cycle) with O(cloudstack.cks.cks_node_cycle#module:mode=taint_pending).
        Not in check mode.
    type: bool
    default: false
  max_unavailable:
    description:
      - How many workers a rollout restarts at a time; only with O(rollout=true), stored with the settings
        for that rollout's batches (M(cloudstack.cks.cks_node_cycle) reads it).
      - With O(rollout=false) it is refused (the seed stores the node settings and nothing else).
      - It is clamped to the number of workers minus one, and is at least 1.
      - Default is the stored value, else V(1).
    type: int
  cancel_rollout:
    description:
      - Ask the running rollout to stop before its next batch (sets the record's cancel flag).
      - Given alone; with no rollout holding the lock there is nothing to cancel and nothing changes - the message then
        says so, and what to do instead (a lock left by a rollout that stopped without its release is taken over by
        the next rollout).
    type: bool
    default: false
  lock_holder:
    description:
      - With O(rollout=true), who takes the lock - the id of the run that does the rollout. Required with O(rollout=true).
      - A rollout holding the lock under this same id is not refused (the lock is renewed).
      - With O(cancel_rollout=true), cancel only the rollout of this holder; a lock held by anyone else is left alone.
    type: str
  lock_duration:
    description:
      - With O(rollout=true), how long in seconds the lock lasts unless renewed. A holder that stops renewing
        loses it after this; the next rollout takes it over and reports the previous one stopped. A batch renews it
        every third of this while it works, so a long batch keeps it.
      - On the controller host the holder ran on, a holder whose ansible-playbook process and last batch run are no
        longer running (pid and start time) is taken over at once, without waiting for its lease to end.
      - The lease records who holds it - the controller's host, its ansible-playbook process (pid, start time), the AWX
        job id (C(JOB_ID), set by AWX) - and the batch in progress; refusals and the C(status) playbook show them.
      - Default is 90.
    type: int
notes:
  - Node types are told apart as CKS names them - C(isetcdnode) marks etcd nodes, C(<prefix>-control-<hex>)
    control nodes, every other node (external ones too) is a worker.
seealso:
  - module: cloudstack.cks.cks_node_outdated
  - module: cloudstack.cks.cks_node_cycle
"""

EXAMPLES = r"""
- name: Give the workers a larger offering and disk (stored only; nodes are not touched)
  cloudstack.cks.cks_node_settings:
    cluster: prod-k8s
    node_offerings:
      worker: cks-large
    node_root_disk_sizes:
      worker: 40
    node_affinity_groups:
      worker: [workers-spread]

- name: Preview the change with its diff
  cloudstack.cks.cks_node_settings:
    cluster: prod-k8s
    node_offerings:
      control: cks-xlarge
  check_mode: true
  diff: true

- name: Start a rollout of the settings (the rollout role does this for you)
  cloudstack.cks.cks_node_settings:
    cluster: prod-k8s
    node_offerings:
      worker: cks-large
    rollout: true
    max_unavailable: 2
    lock_holder: "awx-job-{{ tower_job_id | default('manual') }}"
    lock_duration: 900

- name: Start a rollout in one run - refuse, store, lock, plan and taint the nodes waiting their turn
  cloudstack.cks.cks_node_settings:
    cluster: prod-k8s
    node_offerings:
      worker: cks-large
    rollout: true
    plan: true
    taint_pending: true
    lock_holder: "rollout-{{ now(utc=true, fmt='%Y%m%dT%H%M%S') }}"
  register: rollout_plan

- name: Stop a running rollout between two batches
  cloudstack.cks.cks_node_settings:
    cluster: prod-k8s
    cancel_rollout: true
"""

RETURN = r"""
cluster:
  description: The cluster.
  returned: always
  type: dict
  contains:
    id:
      description: Its id.
      type: str
    name:
      description: Its name.
      type: str
    state:
      description: Its CKS state when it was read.
      type: str
  sample: {"id": "d8e694a9-a6d5-41bf-a7f0-2fea5aa89a4b", "name": "prod-k8s", "state": "Running"}
settings:
  description:
    - The settings of each node type after this call (as stored, or as they would be in check mode).
    - Per type, names next to ids. A null V(affinity_groups) means the type leaves the nodes' groups alone.
  returned: success, except with O(cancel_rollout)
  type: dict
  contains:
    control:
      description: The control nodes' settings (keys as for V(worker)).
      type: dict
    worker:
      description: The workers' settings.
      type: dict
      contains:
        offering:
          description: The offering's name.
          type: str
        offering_id:
          description: The offering's id.
          type: str
        root_disk_size:
          description: The root disk size in GB.
          type: int
        affinity_groups:
          description: The groups' names (dedication groups are never listed; nodes keep theirs).
          type: list
          elements: str
        affinity_group_ids:
          description: The groups' ids.
          type: list
          elements: str
    etcd:
      description: The etcd nodes' settings (keys as for V(worker)).
      type: dict
  sample:
    control: {"offering": "cks-medium", "offering_id": "1b0e...", "root_disk_size": 20,
              "affinity_groups": ["control-spread"], "affinity_group_ids": ["9f1c..."]}
    worker: {"offering": "cks-large", "offering_id": "7a2d...", "root_disk_size": 40,
             "affinity_groups": ["workers-spread"], "affinity_group_ids": ["44ab..."]}
    etcd: {"offering": "cks-medium", "offering_id": "1b0e...", "root_disk_size": null,
           "affinity_groups": null, "affinity_group_ids": null}
previous_settings:
  description: The settings before this call - the recorded ones, or on first use the ones copied from the cluster.
  returned: success, except with O(cancel_rollout)
  type: dict
  sample: {"worker": {"offering": "cks-medium", "offering_id": "1b0e...", "root_disk_size": 20,
                      "affinity_groups": ["workers-spread"], "affinity_group_ids": ["44ab..."]}}
first_use:
  description: Whether nothing was recorded before, so the cluster's own settings were copied first.
  returned: success, except with O(cancel_rollout)
  type: bool
  sample: true
max_unavailable:
  description: The workers a rollout restarts at a time (before the clamp), as stored.
  returned: success, except with O(cancel_rollout)
  type: int
  sample: 1
controlnodesoutofdate:
  description: How many control nodes differ from the settings after this call.
  returned: success, except with O(cancel_rollout)
  type: int
  sample: 0
workernodesoutofdate:
  description: How many workers differ from the settings after this call.
  returned: success, except with O(cancel_rollout)
  type: int
  sample: 5
etcdnodesoutofdate:
  description: How many etcd nodes differ from the settings after this call.
  returned: success, except with O(cancel_rollout)
  type: int
  sample: 0
rollout:
  description: Whether the lock was taken for a rollout.
  returned: success, except with O(cancel_rollout)
  type: bool
  sample: false
lock:
  description: The rollout lock as read (or, with O(rollout=true), as taken); null when there never was one.
  returned: always
  type: dict
  contains:
    holder:
      description: Who holds (or last held) it.
      type: str
    held:
      description: Whether it is held now (held and not expired).
      type: bool
    acquire_time:
      description: When the holder took it.
      type: str
    renew_time:
      description: When the holder last renewed it.
      type: str
    duration_seconds:
      description: How long it lasts after a renewal.
      type: int
    expired:
      description: Whether its holder stopped renewing it.
      type: bool
    taken_over_from:
      description: With O(rollout=true), the previous holder whose lock expired without release, if any.
      type: dict
  sample: {"holder": "awx-job-42", "held": true, "acquire_time": "2026-12-02T16:40:00.000000Z",
           "renew_time": "2026-12-02T16:40:00.000000Z", "duration_seconds": 600, "expired": false,
           "taken_over_from": null}
live_paths:
  description: With O(plan=true) and O(live_scale=auto), the planned nodes by path - C(live) and C(restart) (names).
  returned: when O(plan=true) and O(live_scale=auto)
  type: dict
live_scale_refused:
  description:
    - With O(plan=true) and O(live_scale=auto), why the API key cannot take the live path (listApis does not list
      C(scaleVirtualMachine), C(listServiceOfferings) or C(listCapabilities)); every planned node is then on the
      restart path with this reason, and the rollout role runs its batches with O(live_scale=never).
  returned: when the key may not call what the live path calls
  type: str
  sample: the API key may not call scaleVirtualMachine
plan:
  description:
    - With O(plan=true), the batches in order, as M(cloudstack.cks.cks_node_outdated) returns them. Every other key
      that module returns is returned too - RV(hosts), RV(serial), RV(catalog),
      RV(cloudstack.cks.cks_node_outdated#module:node_types), RV(cloudstack.cks.cks_node_outdated#module:unrollable),
      RV(cloudstack.cks.cks_node_outdated#module:etcd_checks), with O(drain_check)
      RV(cloudstack.cks.cks_node_outdated#module:drain_blockers), and so on - judged against the settings stored by
      this call.
  returned: with O(plan=true)
  type: list
  elements: dict
  sample: [{"node_type": "worker", "nodes": ["alpha-node-1"], "canary": false}]
hosts:
  description: With O(plan=true), the planned nodes in order, for C(add_host).
  returned: with O(plan=true)
  type: list
  elements: str
  sample: ["alpha-node-1"]
serial:
  description: With O(plan=true), the play's C(serial) list, one entry per batch.
  returned: with O(plan=true)
  type: list
  elements: int
  sample: [1]
catalog:
  description: With O(plan=true), the offerings, disk offerings and groups this run read, for the later runs' O(catalog).
  returned: with O(plan=true)
  type: dict
  sample: {service_offerings: [], disk_offerings: [], affinity_groups: []}
pending_taint:
  description: With O(taint_pending), the taint and the nodes it was put on (C(tainted), C(already_tainted), C(not_kubernetes_nodes)).
  returned: with O(plan=true) and O(taint_pending=true), when nodes are planned, not in check mode
  type: dict
  sample: {"key": "cloudstack.apache.org/rollout-pending", "effect": "PreferNoSchedule", "tainted": ["alpha-node-1"],
           "already_tainted": [], "not_kubernetes_nodes": []}
would_not_be_allowed:
  description:
    - With O(plan=true), each command the planned node cycles (and their put-backs - start, the previous offering
      and groups) send that the API key may not call, as C(listApis) answers for it, with the node types and nodes
      that need it. CloudStack answers such a command 432 - a role without it, or from 4.23 an API key pair whose
      own rules leave it out - and once a node is stopped that would leave it down, so a non-empty list refuses the
      rollout before the lock (RV(api_access_error)).
    - Empty when C(listApis) could not be read; RV(cloudstack.cks.cks_node_outdated#module:not_checked) then says so.
  returned: with O(plan=true), when nodes are planned
  type: list
  elements: dict
  sample: [{"command": "updateVMAffinityGroup", "node_types": ["worker"], "nodes": ["alpha-node-1"]}]
api_access_error:
  description: With O(plan=true), all of RV(would_not_be_allowed) in one message; null when the key may send them all.
  returned: with O(plan=true), when nodes are planned
  type: str
  sample: null
api_key_ends:
  description:
    - With O(plan=true), the end date of the API key pair the calls are signed with (C(listUserKeys) C(enddate),
      CloudStack 4.23); null when it has none or it could not be read.
    - When it falls within the rollout's longest expected time (its batches times O(cloudstack.cks.cks_node_cycle#module:batch_timeout)'s
      default, 1800 seconds) the run warns, naming the time - from then on every call is answered 401.
  returned: with O(plan=true), when nodes are planned
  type: str
  sample: "2026-12-07T05:00:00+0000"
autoscaler:
  description:
    - With O(plan=true), the cluster autoscaler - C(on) (the cluster's C(autoscalingenabled), or a
      C(cluster-autoscaler*) Deployment in C(kube-system)), C(minsize), C(maxsize), C(known_nodes) (the nodes there
      now; any other a later batch finds, the autoscaler added) and C(words) (the line the plan shows).
    - When it is on and not in check mode, C(held) - the planned nodes marked
      C(cluster-autoscaler.kubernetes.io/scale-down-disabled=true) so that it removes none of them until the release
      (a node marked V(true) by someone else is left as it is).
  returned: with O(plan=true)
  type: dict
  sample: {"on": true, autoscalingenabled: true, deployment: true, minsize: 3, maxsize: 6,
           known_nodes: [alpha-control-1, alpha-node-1], held: [alpha-node-1],
           words: "cluster autoscaler: on (min 3, max 6 workers); ..."}
node_events_allowed:
  description:
    - With O(plan=true), whether the identity may create and patch Events in C(default) (asked with a
      SelfSubjectAccessReview), where the batches write their Events about the nodes they act on.
    - V(false) is a warning, never a refusal - the rollout runs the same without them, but C(kubectl describe node)
      will not show what it did.
  returned: with O(plan=true), when nodes are planned
  type: bool
  sample: true
lock_version:
  description:
    - With O(plan=true), the resourceVersion of the lock's Lease as this run wrote it when it took the lock.
    - Carried to the first batch's P(cloudstack.cks.cks_node_cycle#module) run in its
      O(cloudstack.cks.cks_node_cycle#module:rollout) (the rollout object starts from this result), so that batch
      renews the lock in one conditional write instead of reading the Lease first.
  returned: with O(plan=true), when the lock was taken, not in check mode
  type: str
  sample: "48213"
cancel_requested:
  description: Whether the record's cancel flag is set (after this call).
  returned: always
  type: bool
  sample: false
last_error:
  description: Why the last rollout stopped, as the record keeps it.
  returned: always
  type: str
  sample: null
msg:
  description: With O(cancel_rollout), what happened.
  returned: with O(cancel_rollout)
  type: str
  sample: the rollout of awx-job-42 stops before its next batch
refusals:
  description: On failure, every refused parameter with its value, why, and what to change.
  returned: when settings are refused
  type: list
  elements: dict
  sample: [{"parameter": "node_root_disk_sizes.worker", "given": 10, "why": "would shrink the root disk of ...",
            "change": "give at least 20 GB, or use rollout=false to store it without restarting any node"}]
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cloudstack.cks.plugins.module_utils import ansible_module as glue
from ansible_collections.cloudstack.cks.plugins.module_utils._common.option_defaults import argument_specs, plan_argument_specs
from ansible_collections.cloudstack.cks.plugins.module_utils._services.settings import node_settings
from ansible_collections.cloudstack.cks.plugins.module_utils._services.start import start_rollout

_PER_TYPE = ("control", "worker", "etcd")


def argument_spec() -> dict[str, Any]:
    spec: dict[str, Any] = {
        "node_offerings": {"type": "dict", "options": {t: {"type": "str"} for t in _PER_TYPE}},
        "node_root_disk_sizes": {"type": "dict", "options": {t: {"type": "int"} for t in _PER_TYPE}},
        "node_affinity_groups": {"type": "dict",
                                 "options": {t: {"type": "list", "elements": "str"} for t in _PER_TYPE}},
        "rollout": {"type": "bool", "default": False},
        "max_unavailable": {"type": "int"},
        "cancel_rollout": {"type": "bool", "default": False},
        "lock_holder": {"type": "str"},
        "lock_duration": {"type": "int"},
        "plan": {"type": "bool", "default": False},
        "select": {"type": "str"},
        **plan_argument_specs(),
        "canary": {"type": "bool", "default": False},
        "live_scale": {"type": "str", "choices": ["never", "auto"], "default": "never"},
        **argument_specs("live_scale_image"),
        "drain_check": {"type": "bool", "default": False},
        "delete_emptydir_data": {"type": "bool", "default": True},
        "force": {"type": "bool", "default": False},
        "taint_pending": {"type": "bool", "default": False},
        **glue.etcd_argument_spec(),
    }
    return glue.cluster_module_argument_spec(spec)


def module_options() -> dict[str, Any]:
    """AnsibleModule's arguments, written once for main() and for the action that runs this module
    in the controller (plugins/action/cks_node_settings.py)."""
    return {"argument_spec": argument_spec(), "supports_check_mode": True,
            "required_if": [("rollout", True, ("lock_holder",)), ("plan", True, ("lock_holder",))],
            "required_together": [("etcd_client_cert", "etcd_client_key")]}


def run(module: glue.ModuleHost) -> None:
    glue.run_service(module, start_rollout if module.params["plan"] else node_settings)


def main() -> None:
    run(AnsibleModule(**module_options()))


if __name__ == "__main__":
    main()
