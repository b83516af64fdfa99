#!/usr/bin/python
# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: cks_node_outdated
short_description: Tell which nodes of a CKS cluster differ from their node type's settings, and plan their rollout
version_added: 0.1.0
description:
  - Reads a CloudStack Kubernetes Service (CKS) cluster - its VMs, root volumes, offerings and affinity groups
    from CloudStack, its nodes from Kubernetes, and the rollout record and lock - and returns, for every node,
    whether and why it is out of date, and the ordered plan a rollout would follow.
  - 'A node is out of date when its service offering differs from its type''s, its root disk is smaller than
    the type''s size, or its affinity groups differ from the type''s recorded groups. ExplicitDedication groups
    are not compared (CKS adds them; a rollout keeps them). A type with no recorded groups leaves the nodes''
    groups alone.'
  - 'The plan: the external etcd nodes one at a time, then the control nodes one at a time, then the workers
    O(max_unavailable) at a time, clamped to the number of workers minus one and at least 1. Within a type,
    stopped nodes, nodes still carrying the annotation of a rollout that stopped and, with O(etcd_endpoints),
    nodes whose etcd member etcd reports unhealthy go first (while that member is down, the quorum preflight
    refuses every other member''s node). While no member is healthy, as during a leader election, etcd is
    asked again for up to 5 seconds before the plan is made from what it says.'
  - Node types that cannot lose a node (a single control node, a 2-node stacked control plane, 2 etcd nodes)
    are not planned; why is returned ready to be kept as the rollout's last error, and the other types are still
    planned. Their stopped nodes are planned (they are down already).
  - Nodes a rollout left annotated that are back (Ready with a new boot ID) and no longer out of date are listed
    in RV(to_release) - they are uncordoned, not restarted.
  - The settings are the ones stored by M(cloudstack.cks.cks_node_settings). Before first use they are the ones
    that would be recorded (copied from the cluster).
  - B(Our record is the source of truth.) CloudStack's own per-type offerings of the cluster go stale - nothing
    outside CloudStack can update them - so the workers a later CKS scale-up adds get CKS's stored worker
    offering, the cluster's one root disk size and only the dedication group. Such nodes show up here as out of
    date, and the next rollout restarts them onto the stored settings.
  - The module only reads. It makes a fixed number of list calls whatever the size of the cluster.
  - 'For a dry run (the rollout playbook''s C(--check)): O(node_offerings), O(node_root_disk_sizes) and
    O(node_affinity_groups) judge the nodes against settings as M(cloudstack.cks.cks_node_settings) would store
    them with O(cloudstack.cks.cks_node_settings#module:rollout=true) (refused as it would refuse them), and
    O(drain_check) tells what would block the drain of each planned node now: PodDisruptionBudgets that allow no
    disruption, pods that several budgets select, pods the drain would refuse to evict.'
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
    description: The module only reads, so it runs the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to show.
  idempotent:
    support: full
    description: It never changes anything.
options:
  max_unavailable:
    description:
      - How many workers to restart at a time (before the clamp).
      - Default is the value stored with the settings, else V(1).
    type: int
  select:
    description:
      - A JMESPath expression over the list of node records (see RV(nodes)) that limits the batches to the nodes
        it gives (records or names). The counts and reasons still cover every node.
      - For example V([?node_type=='worker']) or V([?contains(name, 'node-18f')].name).
      - Needs the C(jmespath) Python library.
      - The order, the clamp (the whole cluster's workers minus one) and the quorum rules still apply to the nodes
        picked. The nodes left out that have work left are in RV(not_selected), and still counted as out of date.
    type: str
  restart:
    description:
      - Which nodes the plan restarts. V(outdated) - the nodes with work left (out of date, down, or still
        cordoned by a rollout that stopped). V(selected) - those and the nodes O(select) picks, with no change
        when they have none (needs O(select)). V(all) - every node, with no setting changed (a rolling restart, as
        kured does it).
      - Such a node is in RV(work) with C(restart=true) and the why C(restart asked, no change); it is not counted
        as out of date. The order, the clamp and the quorum rules are the same.
      - V(selected) and V(all) resume the restart round the rollout record keeps (each node's boot ID when a
        restart of the same scope began, until a rollout of it runs every batch) - a rerun after a killed, failed or
        cancelled restart plans only the nodes not booted since; see RV(restart_round).
    type: str
    choices: [outdated, selected, all]
    default: outdated
  canary:
    description:
      - Restart the first worker of the plan alone, before the workers go O(max_unavailable) (clamped) at a time.
      - A rollout stops at a failed batch, so a canary that fails stops it with no other worker touched.
      - The canary batch is marked in RV(plan); control and etcd nodes go one at a time anyway.
    type: bool
    default: false
  live_scale:
    description:
      - V(auto) adds each planned node's C(path) to RV(nodes) and lists them in RV(live_paths) - whether a rollout with
        C(rollout_live_scale=auto) would grow it without a restart (V(live)) or restart it (V(restart)), and why,
        from the node's VM, its offerings and C(listCapabilities) as they are now. V(never) reads nothing more.
      - A live path that adds vCPUs also needs room for them in the running domain, which no CloudStack API shows (the
        domain's maximum was written at the VM's last start, by that release and its C(kvm.cpu.dynamic.scaling.capacity)).
        This module creates nothing, so it does not ask the guest; such a path's reason ends C(headroom checked before
        the scale). The rollout's plan (M(cloudstack.cks.cks_node_settings) with O(cloudstack.cks.cks_node_settings#module:plan=true),
        not in check mode) asks it, and a domain without room takes the restart path with why.
    type: str
    choices: [never, auto]
    default: never
  node_offerings:
    description:
      - Judge the nodes against this service offering per node type (name or id) instead of the stored one, as
        M(cloudstack.cks.cks_node_settings) would store it with O(cloudstack.cks.cks_node_settings#module:rollout=true).
        Nothing is stored. A type left out keeps the stored offering.
      - Refused as a rollout would refuse it (unknown, ambiguous, custom or too small offerings; a type that cannot
        lose a node).
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
      - Judge the nodes against this root disk size in GB per node type instead of the stored one (see
        O(node_offerings)). A size that would shrink a node, or resize a disk whose offering fixes its size, is refused.
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
      - Judge the nodes against these affinity groups (names or ids) per node type instead of the stored ones (see
        O(node_offerings)). ExplicitDedication groups are refused (never compared, always kept).
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
  drain_check:
    description:
      - Also tell, for each planned Kubernetes node, what would block its drain now (RV(drain_blockers)), as
        information for a dry run; a rollout's drain still retries an eviction a budget refuses (429) until the
        batch's deadline.
      - 'Reads the pods and the PodDisruptionBudgets once (paged, all namespaces) and each DaemonSet that controls
        a pod once: the same access a rollout''s drain needs.'
    type: bool
    default: false
  delete_emptydir_data:
    description:
      - With O(drain_check), whether the drain would evict pods with emptyDir volumes (as the rollout's
        C(delete_emptydir_data), by default true as CKS's own drain); with V(false) such pods stop the drain.
    type: bool
    default: true
  force:
    description:
      - With O(drain_check), whether the drain would evict pods without a controller (as the rollout's C(force));
        without it such pods stop the drain.
    type: bool
    default: false
requirements:
  - jmespath (for O(select))
seealso:
  - module: cloudstack.cks.cks_node_settings
  - module: cloudstack.cks.cks_node_cycle
"""

EXAMPLES = r"""
- name: What differs, and the plan
  cloudstack.cks.cks_node_outdated:
    cluster: prod-k8s
  register: outdated

- name: Show why each out-of-date node differs
  ansible.builtin.debug:
    msg: "{{ item.name }}: {{ item.reasons | map(attribute='message') | join('; ') }}"
  loop: "{{ outdated.nodes | selectattr('out_of_date') }}"

- name: Hand the plan to the rollout play (one batch per serial entry)
  ansible.builtin.add_host:
    name: "{{ item }}"
    groups: cks_rollout
  loop: "{{ outdated.hosts }}"

- name: Plan only the workers, 3 at a time
  cloudstack.cks.cks_node_outdated:
    cluster: prod-k8s
    max_unavailable: 3
    select: "[?node_type=='worker']"

- name: The plan of a rolling restart of every worker with no setting changed (as kured does it), 2 at a time
  cloudstack.cks.cks_node_outdated:
    cluster: prod-k8s
    restart: all
    select: "[?node_type=='worker']"
    max_unavailable: 2

- name: Dry run - the plan for new worker settings, a canary first, and what would block the drains
  cloudstack.cks.cks_node_outdated:
    cluster: prod-k8s
    max_unavailable: 3
    canary: true
    node_offerings:
      worker: cks-large
    node_root_disk_sizes:
      worker: 40
    drain_check: true
    delete_emptydir_data: true
  register: preview

- name: Show what would block a drain
  ansible.builtin.debug:
    msg: "Batch {{ item.batch }} {{ item.node }}: {{ item.messages | join('; ') }}"
  loop: "{{ preview.drain_blockers }}"
"""

RETURN = r"""
cluster:
  description: The cluster.
  returned: always
  type: dict
  sample: {"id": "d8e694a9-a6d5-41bf-a7f0-2fea5aa89a4b", "name": "prod-k8s", "state": "Running", "external_etcd": false}
nodes:
  description: Every node of the cluster, in CloudStack's order (creation order).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The node's name (the VM name in lowercase; the Kubernetes node name).
      type: str
    vm_name:
      description: The VM's name.
      type: str
    vm_id:
      description: The VM's id.
      type: str
    ip_address:
      description: The VM's address on its default network (V(null) when CloudStack reports none).
      type: str
    node_type:
      description: V(control), V(worker) or V(etcd).
      type: str
    vm_state:
      description: The VM's state (V(Running), V(Stopped), ...).
      type: str
    kubernetes_node:
      description: Whether a Kubernetes node of this name exists (etcd nodes are not Kubernetes nodes).
      type: bool
    ready:
      description: Whether the Kubernetes node is Ready.
      type: bool
    boot_id:
      description: The boot ID the kubelet reports.
      type: str
    annotated:
      description: Whether it carries the rollout annotation C(cloudstack.apache.org/rollout-boot-id).
      type: bool
    rollout_boot_id:
      description: The boot ID in that annotation (recorded before the node was cordoned).
      type: str
    back:
      description: Annotated, Ready, and with a boot ID other than the annotation's.
      type: bool
    cordoned:
      description: Whether the node is unschedulable.
      type: bool
    cordoned_by_others:
      description: Cordoned without the rollout annotation - someone else cordoned it; a rollout leaves it cordoned.
      type: bool
    external:
      description: Added with C(addNodesToKubernetesCluster).
      type: bool
    offering:
      description: The VM's service offering (name).
      type: str
    offering_id:
      description: The VM's service offering (id).
      type: str
    root_disk_size:
      description: The root disk size in GB.
      type: int
    affinity_groups:
      description: The VM's affinity groups (names), dedication groups included.
      type: list
      elements: str
    dedication_groups:
      description: The VM's ExplicitDedication groups (never compared, always kept).
      type: list
      elements: str
    out_of_date:
      description: Whether the node differs from its type's settings.
      type: bool
    reasons:
      description: How it differs. V(kind) is V(offering), V(root_disk) or V(affinity_groups); V(from) and V(to) are
        offering or group references (id and name) or sizes in GB; V(message) says it in words. V(kind)
        V(kubelet_capacity) (V(from) and V(to) null) - its kubelet reports fewer CPUs or well less memory than its
        VM has, a live scale it has not seen (V(message) says both); such a node is out of date whatever the
        settings.
      type: list
      elements: dict
    path:
      description: With O(live_scale=auto), for a planned node - C(path) (V(live) or V(restart)) and C(reason).
      type: dict
      returned: when O(live_scale=auto) and the node is planned
  sample:
    - name: alpha-node-196ecb50ef8
      node_type: worker
      vm_state: Running
      ready: true
      boot_id: cb596b60-6102-4b13-b1ec-77eb8e1f0f2d
      annotated: false
      cordoned_by_others: false
      out_of_date: true
      reasons:
        - kind: offering
          from: {"id": "4a5f...", "name": "cks-medium"}
          to: {"id": "6120...", "name": "cks-large"}
          message: offering cks-medium -> cks-large
        - kind: root_disk
          from: 20
          to: 40
          message: root disk 20 GB -> 40 GB
out_of_date:
  description: The names of the nodes that differ from their type's settings.
  returned: always
  type: list
  elements: str
  sample: ["alpha-node-196ecb50ef8"]
controlnodesoutofdate:
  description: How many control nodes differ from their settings.
  returned: always
  type: int
  sample: 0
workernodesoutofdate:
  description: How many workers differ from their settings.
  returned: always
  type: int
  sample: 5
etcdnodesoutofdate:
  description: How many etcd nodes differ from their settings.
  returned: always
  type: int
  sample: 0
node_types:
  description: Per node type, its node count, how many are out of date, whether it can lose a node and why,
    and why its nodes are not rolled if they are not (V(not_rolled)).
  returned: always
  type: dict
  sample: {"control": {"nodes": 1, "out_of_date": 1, "can_lose_a_node": false, "why": "a single control node ...",
                       "not_rolled": "control nodes not restarted: ..."}}
live_paths:
  description: With O(live_scale=auto), the planned nodes by path - C(live) and C(restart) (names).
  returned: when O(live_scale=auto)
  type: dict
  sample: {live: [alpha-node-196ecb50ef8], restart: [alpha-control-196ecb50e9c]}
plan:
  description: The batches in order; each is one node type and the nodes restarted together. V(canary) is true for
    the first worker batch of a plan with O(canary=true).
  returned: always
  type: list
  elements: dict
  sample: [{"node_type": "control", "nodes": ["alpha-control-1"], "canary": false},
           {"node_type": "worker", "nodes": ["alpha-node-1"], "canary": true},
           {"node_type": "worker", "nodes": ["alpha-node-2", "alpha-node-3"], "canary": false}]
canary:
  description: Whether the plan rolls the first worker alone (O(canary)).
  returned: always
  type: bool
  sample: false
not_selected:
  description: With O(select), the nodes with work left (out of date, stopped, or still annotated) that it left out;
    they are still counted as out of date. Nodes of a type that cannot lose a node are in RV(unrollable) instead.
    Empty without O(select).
  returned: always
  type: list
  elements: str
  sample: ["alpha-node-3"]
restart_round:
  description:
    - With O(restart=selected) or O(restart=all), the restart round the plan begins or resumes - C(scope) (V(all),
      or C(selected:) and the names), C(resumed) (a round of that scope was recorded and has not ended), C(started)
      and C(run_id) of the resumed round, C(restarted) (the nodes booted since it began, not restarted again) and
      C(words) (the line the plan shows). A rollout (O(cloudstack.cks.cks_node_settings#module:plan=true)) that begins
      a round records it once it holds the lock. V(null) with O(restart=outdated).
  returned: always
  type: dict
  sample: {scope: all, resumed: true, started: "2026-12-07T13:00:00Z", run_id: run-killed,
           restarted: [alpha-node-1], words: "restart all: resumes the round begun 2026-12-07T13:00:00Z by run-killed;
           restarted since it began, not again: alpha-node-1"}
drain_blockers:
  description:
    - With O(drain_check), per planned Kubernetes node in plan order (V(batch) is the batch's number, from 1), what
      would block its drain now; nodes with nothing in the way are left out.
    - V(pdbs) - PodDisruptionBudgets allowing no disruption now and the node's pods they cover (the drain retries
      until the batch's deadline); V(multiple_pdbs) - pods that several budgets select (the Eviction API answers 500,
      the drain fails); V(pods) - pods the drain refuses to evict, per reason (it stops before any eviction, as
      C(kubectl drain)); V(messages) - all of it in words, worst first.
  returned: when O(drain_check=true)
  type: list
  elements: dict
  sample:
    - batch: 4
      node: alpha-node-1
      node_type: worker
      pdbs:
        - pdb: default/web
          disruptions_allowed: 0
          current_healthy: 2
          desired_healthy: 2
          pods: ["default/web-7d9f-abcde"]
          message: "PodDisruptionBudget default/web allows 0 disruptions (2 healthy, 2 needed): pods default/web-7d9f-abcde
            cannot be evicted until it allows one"
      multiple_pdbs: []
      pods: []
      messages: ["PodDisruptionBudget default/web allows 0 disruptions (2 healthy, 2 needed): pods default/web-7d9f-abcde
                 cannot be evicted until it allows one"]
serial:
  description: The play's C(serial) list, one entry per batch (Ansible repeats the last entry). Empty when there is nothing to do.
  returned: always
  type: list
  elements: int
  sample: [1, 1, 1, 2, 2]
hosts:
  description: The planned nodes in order, for C(add_host).
  returned: always
  type: list
  elements: str
  sample: ["alpha-control-1", "alpha-node-1", "alpha-node-2"]
work:
  description: Every node with work left (out of date, VM not running, or still annotated and not back), skipped
    ones included, in plan order, with why (C(etcd_down) when its etcd member is not healthy; C(restart) when
    O(restart) restarts it with nothing else to do).
  returned: always
  type: list
  elements: dict
  sample: [{"name": "alpha-node-1", "node_type": "worker", "vm_state": "Stopped", "annotated": false, "back": false,
            "etcd_down": false, "restart": false, "out_of_date": true, "reasons": [],
            "why": "offering cks-medium -> cks-large; VM is Stopped"}]
etcd:
  description:
    - What etcd said of its members when the plan was made - C(asked), C(down) (the members it reports unhealthy,
      named as their nodes), C(message) (the quorum arithmetic) and C(error) (why it could not be asked; the plan is
      then made without it and each batch's preflight still checks the quorum).
  returned: when O(etcd_endpoints) are given, or the control plane has stacked etcd (asked through the Kubernetes API)
  type: dict
  sample: {"asked": true, "down": ["prod-control-18c5a1e2b4f"], "message": "2 of 3 voting members healthy; 2 needed",
           "error": null}
etcd_checks:
  description:
    - Per node type, how a rollout would check etcd - V(exec through the Kubernetes API) (stacked etcd, the key may
      exec into every etcd pod, asked with a SelfSubjectAccessReview), V(a short-lived pod on <control node> through
      the Kubernetes API) (external etcd nodes, the key may create and delete pods and get pods/log in kube-system),
      V(the given etcd_endpoints), V(not needed) (workers; control nodes beside external etcd) or
      V(cannot be checked).
  returned: always
  type: dict
  sample: {"control": "exec through the Kubernetes API", "etcd": "not needed", "worker": "not needed"}
etcd_check_refusal:
  description:
    - Why the planned rollout would need an etcd check it cannot make, with what to give; null when it can.
    - The rollout role refuses before it takes the lock when this is set.
  returned: always
  type: str
  sample: null
would_be_refused:
  description:
    - The planned changes CloudStack would refuse only once the node's VM is stopped, one entry per node (the first
      rule it breaks). Judged on what the key can read - who it is (listAccounts) and its owner's headroom
      (listAccounts or listProjects); see RV(not_checked).
    - The rollout role refuses before it takes the lock when any is listed, and nothing is touched.
  returned: always
  type: list
  elements: dict
  contains:
    node:
      description: The node.
      type: str
    node_type:
      description: Its node type.
      type: str
    rule:
      description: C(affinity group access), C(affinity group owner), C(resource limit), C(storage fit) or C(offering state).
      type: str
    parameter:
      description: The setting to change (C(node_offerings), C(node_root_disk_sizes), C(node_affinity_groups)).
      type: str
    why:
      description: What CloudStack would refuse, and with which answer.
      type: str
    change:
      description: What to change - another value, a limit to raise, or the key that can make the change.
      type: str
    message:
      description: The node, the setting, why and what to change in one line.
      type: str
  sample: []
refusal_error:
  description: All of RV(would_be_refused) in one message; null when nothing would be refused.
  returned: always
  type: str
  sample: null
would_not_be_placed:
  description:
    - The strict affinity groups (C(host anti-affinity), C(host affinity)) the planned change puts nodes into whose
      members CloudStack's deployment planner could not all place once the nodes are stopped, counted from the
      zone's Up and Enabled hosts (those dedicated to the nodes' ExplicitDedication group, where it has any), the
      members already placed and each host's free CPU and memory (with its overprovisioning) for the new offering.
      Needs a key that may list hosts (a root admin); otherwise RV(not_checked) says so.
    - The rollout role refuses before it takes the lock when any is listed, and nothing is touched.
  returned: always
  type: list
  elements: dict
  contains:
    group:
      description: The affinity group.
      type: str
    group_type:
      description: C(host anti-affinity) or C(host affinity).
      type: str
    nodes:
      description: The planned nodes in the group after their change.
      type: list
      elements: str
    node_type:
      description: Their node type.
      type: str
    members:
      description: How many members the group would have.
      type: int
    hosts:
      description: How many hosts can hold them (anti-affinity); 0 for affinity.
      type: int
    why:
      description: Why the planner would refuse the start (533).
      type: str
    change:
      description: What to change - hosts to add, a non-strict group, a smaller offering.
      type: str
    message:
      description: The group, its nodes, why and what to change in one line.
      type: str
  sample: []
placement_error:
  description: All of RV(would_not_be_placed) in one message; null when every node can be placed (or it was not checked).
  returned: always
  type: str
  sample: null
not_checked:
  description:
    - What could not be judged because the key cannot read it (its own account, the owner's limits, the limits of
      the domains above the owner).
    - Whether the nodes of strict affinity groups can be placed, when the key cannot list the zone's hosts.
  returned: always
  type: list
  elements: str
  sample: []
to_release:
  description: Annotated nodes that are back and no longer out of date - uncordon them, do not restart them.
  returned: always
  type: list
  elements: str
  sample: []
unrollable:
  description: Node types whose running nodes are not planned, with why (they cannot lose a node).
  returned: always
  type: dict
  sample: {"control": "control nodes not restarted: solo-control-1 (offering cks-medium -> cks-large): a single control node ..."}
unrollable_error:
  description: The unrollable types in one message, ready to be kept as the rollout's last error; null when none.
  returned: always
  type: str
  sample: null
worker_batch_size:
  description: The workers per batch after the clamp.
  returned: always
  type: int
  sample: 4
max_unavailable:
  description: The O(max_unavailable) used (given, stored, or 1).
  returned: always
  type: int
  sample: 10
restart:
  description: The O(restart) the plan was made with.
  returned: always
  type: str
  sample: outdated
selected:
  description: The nodes O(select) picked; null without O(select).
  returned: always
  type: list
  elements: str
  sample: null
settings:
  description: The settings of each node type the nodes were judged against, names next to ids (see
    M(cloudstack.cks.cks_node_settings)'s RV(cloudstack.cks.cks_node_settings#module:settings)).
  returned: always
  type: dict
  sample: {"worker": {"offering": "cks-large", "offering_id": "6120...", "root_disk_size": 40,
                      "affinity_groups": ["workers-spread"], "affinity_group_ids": ["952a..."]}}
settings_recorded:
  description: Whether the settings are stored; false means they are the ones first use would record.
  returned: always
  type: bool
  sample: true
settings_given:
  description: Whether the nodes were judged against settings given with the call (O(node_offerings),
    O(node_root_disk_sizes), O(node_affinity_groups)) laid over the stored ones, rather than the stored ones alone.
  returned: always
  type: bool
  sample: false
lock:
  description: The rollout lock (the Lease), or null when there never was one.
  returned: always
  type: dict
  sample: {"holder": "awx-job-42", "held": true, "acquire_time": "2026-12-02T16:40:00.000000Z",
           "renew_time": "2026-12-02T16:41:00.000000Z", "duration_seconds": 600, "expired": false, "taken_over_from": null}
catalog:
  description:
    - The service offerings, disk offerings and affinity groups this run read (only the fields the collection
      uses). Give it as O(catalog) to the later runs of the same rollout, which then do not list them again.
  returned: always
  type: dict
  sample: {service_offerings: [{id: 9a1d, name: cks-large, cpunumber: 4, memory: 8192}],
           disk_offerings: [], affinity_groups: [{id: 77b2, name: cks-anti, type: host anti-affinity}]}
lock_holder:
  description: Who holds the lock now; null when nobody does (or the holder's lock expired).
  returned: always
  type: str
  sample: null
last_error:
  description: Why the last rollout stopped, from the record.
  returned: always
  type: str
  sample: null
result:
  description:
    - How the last rollout ended, as its release recorded it, for example V(done) or V(failed at batch 2 of 5);
      null before any.
  returned: always
  type: str
  sample: done
outcome:
  description: The cluster's health after the last rollout, as its release recorded it (V(Running) or V(Alert)); null before any.
  returned: always
  type: str
  sample: Running
record_updated:
  description: When the rollout record was last written (RFC 3339, UTC); null when there is none.
  returned: always
  type: str
  sample: "2026-12-02T16:52:10.123456Z"
cancel_requested:
  description: Whether the record's cancel flag is set.
  returned: always
  type: bool
  sample: false
previous_holder_stopped:
  description: A previous rollout that stopped without releasing the lock, as the next one noticed it.
  returned: always
  type: dict
  sample: null
autoscaler:
  description:
    - The cluster autoscaler - C(on) (the cluster's C(autoscalingenabled), or a C(cluster-autoscaler*) Deployment in
      C(kube-system)), C(minsize), C(maxsize), C(held_by_rollout) (the nodes a rollout marked scale-down-disabled
      and has not released yet) and C(words) (the line C(status) shows).
  returned: always
  type: dict
  sample: {"on": true, autoscalingenabled: true, deployment: true, minsize: 3, maxsize: 6, held_by_rollout: [],
           words: "cluster autoscaler: on (min 3, max 6 workers); ..."}
stopped_without_release:
  description:
    - A rollout that stopped without its release, or V(null). Its lock, expired but still naming it, says so
      until another rollout takes the lock over; from then on the record does, until a release has run.
    - C(holder), C(since) (when it took the lock), C(renew_time), C(taken_over) (whether another rollout has
      taken the lock since) and C(nodes_left_annotated) (the nodes carrying the rollout annotation now).
  returned: always
  type: dict
  sample: {"holder": "rollout-20261203T101500-42", "since": "2026-12-03T10:15:00.000000Z",
           "renew_time": "2026-12-03T10:17:00.000000Z", "taken_over": false, "nodes_left_annotated": ["roll-node-2"]}
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cloudstack.cks.plugins.module_utils import ansible_module as glue
from ansible_collections.cloudstack.cks.plugins.module_utils._common.option_defaults import plan_argument_specs
from ansible_collections.cloudstack.cks.plugins.module_utils._services.outdated import node_outdated

_PER_TYPE = ("control", "worker", "etcd")


def argument_spec() -> dict[str, Any]:
    spec: dict[str, Any] = {
        "max_unavailable": {"type": "int"},
        "select": {"type": "str"},
        **plan_argument_specs(),
        "canary": {"type": "bool", "default": False},
        "live_scale": {"type": "str", "choices": ["never", "auto"], "default": "never"},
        "node_offerings": {"type": "dict", "options": {t: {"type": "str"} for t in _PER_TYPE}},
        "node_root_disk_sizes": {"type": "dict", "options": {t: {"type": "int"} for t in _PER_TYPE}},
        "node_affinity_groups": {"type": "dict",
                                 "options": {t: {"type": "list", "elements": "str"} for t in _PER_TYPE}},
        "drain_check": {"type": "bool", "default": False},
        "delete_emptydir_data": {"type": "bool", "default": True},
        "force": {"type": "bool", "default": False},
        **glue.etcd_argument_spec(),
    }
    return glue.cluster_module_argument_spec(spec)


def module_options() -> dict[str, Any]:
    """AnsibleModule's arguments, written once for main() and for the action that runs this module
    in the controller (plugins/action/cks_node_outdated.py)."""
    return {"argument_spec": argument_spec(), "required_together": [("etcd_client_cert", "etcd_client_key")],
            "supports_check_mode": True}


def run(module: glue.ModuleHost) -> None:
    glue.run_service(module, node_outdated)


def main() -> None:
    run(AnsibleModule(**module_options()))


if __name__ == "__main__":
    main()
