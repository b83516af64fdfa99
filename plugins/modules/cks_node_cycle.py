#!/usr/bin/python
# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: cks_node_cycle
short_description: Restart one batch of CKS nodes with their node type's settings, or release a rollout
version_added: 0.1.0
description:
  - With O(mode=cycle), restarts the nodes of one batch (O(nodes)) of a CloudStack Kubernetes Service
    cluster with the settings of their node type - service offering, root disk size, affinity groups.
    The nodes of the batch are cycled at the same time, each through these steps.
  - First, the nodes that a rollout which stopped left cordoned and that are back since (Ready with a new
    boot ID, or never taken down) are uncordoned and their annotation removed, without a restart - before
    this batch drains, so that the pods it evicts have somewhere to go.
  - B(Preflight), for the whole batch before anything changes. Every other VM of the cluster must be
    Running and every other Kubernetes node Ready, and the cluster must be in CKS state V(Running) or
    V(Alert). For a control node with stacked etcd or an external etcd node, a quorum of the other etcd
    members must be healthy (asked of etcd itself, see O(etcd_endpoints)) and the API server must report
    etcd ready (C(/readyz/etcd)). With external etcd, another control node must be Running and Ready to
    serve the API. A node type that cannot lose a node (a single control node, a 2-node stacked control
    plane, 2 etcd nodes) is never taken down.
  - B(Annotate and cordon). The node gets the annotation C(cloudstack.apache.org/rollout-boot-id) with its
    current boot ID, then is cordoned. A node someone else had already cordoned gets no annotation and
    stays cordoned afterwards. A node still carrying the annotation of a rollout that stopped keeps the
    boot ID recorded there.
  - B(Drain), as C(kubectl drain --ignore-daemonsets) does it, through the Eviction API so that
    PodDisruptionBudgets are honoured. DaemonSet and mirror pods stay; pods with C(emptyDir) volumes need
    O(delete_emptydir_data), pods without a controller need O(force); any such pod stops the drain before
    a single pod is evicted. Evictions refused by a PodDisruptionBudget (HTTP 429) are retried every
    O(eviction_retry_interval) seconds until the batch deadline; an evicted pod counts once it is gone by
    UID.
  - B(Change). The VM is stopped (unless it is Stopped already); then, only where they differ,
    C(changeServiceForVirtualMachine) sets the offering, C(resizeVolume) grows the ROOT disk (never shrinks
    it), and C(updateVMAffinityGroup) sets the type's groups plus the ExplicitDedication groups the VM has
    (a type without recorded groups leaves the groups alone). The VM is then started, and the deployment
    planner places it by its new groups.
  - B(Verify). The node must come back Ready (reason C(KubeletReady), no C(unreachable) or C(not-ready)
    taint) with a boot ID other than the one from before the stop - a Ready condition left over from
    before the stop is never accepted. The VM must no longer differ from the settings and, for etcd
    members, etcd must report the member healthy. Then the node is uncordoned and the annotation removed
    in one patch (a node cordoned by someone else stays cordoned).
  - One deadline, O(batch_timeout), covers the whole batch. A failure at any step leaves the node as it
    is, and the task fails naming the node, the step and what CloudStack or Kubernetes answered; run
    O(mode=release) afterwards (in an C(always) section) to judge the nodes.
  - With O(mode=release), ends a rollout, however it ended - after success, after a failed step, after a
    cancel, or after an exception before any batch. It uncordons the annotated nodes that are Ready with a
    new boot ID, and those that never went down (a drain that failed), and removes their annotation; it
    leaves every other annotated node cordoned and says why; it never touches a node someone else
    cordoned. It recounts the cluster's cores and memory from the VMs' actual offerings, records the
    outcome (V(Running) if every VM runs, every node is Ready and none was left cordoned, else V(Alert))
    with O(last_error) or clears it, and gives back the lock if O(lock_holder) holds it. Running it twice
    gives the same end state.
author:
  - cloudstack.cks contributors (@cloudstack-cks)
extends_documentation_fragment:
  - cloudstack.cks.cluster
  - cloudstack.cks.cloudstack
  - cloudstack.cks.kubernetes
attributes:
  check_mode:
    support: full
    description:
      - O(mode=cycle) runs the preflight (it only reads) and returns the steps it would run for each node,
        with the changes it would make, without changing anything.
      - O(mode=release) returns what it would uncordon and record, without changing anything.
  diff_mode:
    support: none
    description: The changes of each node are in RV(nodes[].changes) instead, with their before and after values.
options:
  mode:
    description:
      - V(cycle) restarts the nodes of O(nodes); V(release) ends the rollout (see the description).
    type: str
    choices: [cycle, release]
    default: cycle
  nodes:
    description:
      - The nodes of one batch, by Kubernetes node name (the VM name in lowercase; case does not matter).
      - All of one node type; control and etcd nodes one at a time. Required with O(mode=cycle).
    type: list
    elements: str
  settings:
    description:
      - The per-type settings to restart the nodes with, as C(cloudstack.cks.cks_node_settings) returns
        them under C(settings) - for each of V(control), V(worker), V(etcd) a dictionary with
        C(offering_id), C(root_disk_gb) (GB) and C(affinity_group_ids) (V(null) leaves the groups alone).
      - If not given, the settings stored in the cluster's rollout record are used, which is the normal way.
    type: dict
  batch_timeout:
    description:
      - Seconds the whole batch may take, from the preflight to the last uncordon.
    type: float
    default: 1800
  job_timeout:
    description:
      - Seconds each CloudStack async job (stop, resize, affinity, start) may take, cut down to what the
        batch has left.
    type: float
    default: 900
  delete_emptydir_data:
    description:
      - Evict pods that use C(emptyDir) volumes too; their data is lost. Without it such a pod stops the drain.
    type: bool
    default: false
  force:
    description:
      - Evict pods that declare no controller (and pods of a DaemonSet that no longer exists) too; nothing
        brings them back. Without it such a pod stops the drain.
    type: bool
    default: false
  grace_period:
    description:
      - Seconds each evicted pod gets to terminate. If not given, each pod's own
        C(terminationGracePeriodSeconds).
    type: int
  eviction_retry_interval:
    description:
      - Seconds between two eviction attempts of a pod whose PodDisruptionBudget does not allow it yet
        (as C(kubectl drain), 5).
    type: float
    default: 5
  poll_interval:
    description:
      - Seconds between two reads while waiting for a pod to go, a node to come back or etcd to be healthy.
        CloudStack async jobs are polled at the CloudStack client's own interval.
    type: float
    default: 0.5
  etcd_endpoints:
    description:
      - etcd client URLs to ask about the quorum (see C(cloudstack.cks.cks_etcd_quorum)). Needed for a batch of
        a control node with stacked etcd or of an external etcd node; other batches do not use it.
    type: list
    elements: str
    default: []
  etcd_ca_cert:
    description:
      - CA bundle of the etcd server certificates, for V(https://) endpoints.
    type: path
  etcd_client_cert:
    description:
      - Client certificate for etcd (stacked etcd asks for one). Requires O(etcd_client_key).
    type: path
  etcd_client_key:
    description:
      - Private key of O(etcd_client_cert). Read, never returned.
    type: path
  etcd_validate_certs:
    description:
      - If V(false), the etcd server certificates are not verified.
    type: bool
    default: true
  etcd_timeout:
    description:
      - Seconds to wait for each answer of etcd.
    type: float
    default: 5
  lock_holder:
    description:
      - The holder identity of the rollout lock (the run id the rollout took it with).
      - With O(mode=cycle), the batch only starts if this holder still holds the lock, and renews it.
      - With O(mode=release), the lock is given back if this holder holds it (else left alone).
      - If not given, the lock is neither checked nor released.
    type: str
  last_error:
    description:
      - With O(mode=release), why the rollout stopped, stored in the record. V(null) clears the last error
        (unless O(skipped) is given).
    type: str
  skipped:
    description:
      - With O(mode=release), the node types or nodes that were skipped and why (for example the plan's
        C(skipped) reasons), stored in the record's last error.
    type: list
    elements: str
    default: []
notes:
  - Nodes are restarted, not changed live - an offering change, a larger root disk (grown by cloud-init at boot)
    and new affinity groups all take effect the same way on every hypervisor.
  - While a node VM is stopped, CKS's state scanner moves the cluster to V(Alert); it returns to V(Running) by
    itself once every node is Ready again. The module tolerates that Alert.
  - The cycle marks a node with the annotation C(cloudstack.apache.org/rollout-stop-sent) just before it stops its
    VM, so that O(mode=release) can tell a node that never went down (uncordoned) from one whose Ready may be the
    stale one from before the stop (left cordoned). Both annotations go when the node is uncordoned.
seealso:
  - module: cloudstack.cks.cks_node_settings
  - module: cloudstack.cks.cks_node_outdated
  - module: cloudstack.cks.cks_etcd_quorum
"""

EXAMPLES = r"""
- name: Restart one batch of workers with the stored settings
  cloudstack.cks.cks_node_cycle:
    cluster: prod
    nodes: "{{ ansible_play_batch }}"
    lock_holder: "{{ rollout_id }}"
    delete_emptydir_data: true
  delegate_to: localhost
  run_once: true
  register: cycled

- name: Restart a control node of a stacked control plane, checking etcd from the controller
  cloudstack.cks.cks_node_cycle:
    cluster: prod
    nodes: [prod-control-18c5a1e2b4f]
    lock_holder: "{{ rollout_id }}"
    etcd_endpoints: [https://10.1.1.11:2379, https://10.1.1.12:2379, https://10.1.1.13:2379]
    etcd_ca_cert: /secure/etcd/ca.crt
    etcd_client_cert: /secure/etcd/healthcheck-client.crt
    etcd_client_key: /secure/etcd/healthcheck-client.key

- name: End the rollout, whatever happened
  cloudstack.cks.cks_node_cycle:
    cluster: prod
    mode: release
    lock_holder: "{{ rollout_id }}"
    last_error: "{{ rollout_error | default(omit) }}"
    skipped: "{{ plan.skipped.values() | list }}"
"""

RETURN = r"""
batch:
  description: The nodes of the batch, in lowercase.
  returned: mode=cycle
  type: list
  elements: str
  sample: [prod-node-2a1f, prod-node-9c3e]
preflight:
  description: What the preflight checked (cluster state, etcd quorum verdict, C(/readyz/etcd) status).
  returned: mode=cycle, when the preflight passed
  type: dict
  sample: {cluster_state: Running, ok: true}
nodes:
  description: One entry per node of the batch.
  returned: mode=cycle
  type: list
  elements: dict
  contains:
    name:
      description: The node.
      type: str
    node_type:
      description: V(control), V(worker) or V(etcd).
      type: str
    outcome:
      description: V(done), V(failed), or V(would_cycle) in check mode.
      type: str
    steps:
      description:
        - The steps in order, each with C(name) (annotate, cordon, drain, stop, change_offering, resize_root_disk,
          update_affinity_groups, start, verify, uncordon), C(started) and C(ended) (Unix times), C(outcome)
          (V(ok), V(skipped), V(failed); V(would_run), V(would_skip) in check mode) and C(detail).
      type: list
      elements: dict
    changes:
      description:
        - What changed (or would change), C(from) and C(to) - C(offering) (names, with C(from_id), C(to_id)),
          C(root_disk_gb), C(affinity_groups) (names, with ids); and C(drain) (the pods evicted).
      type: dict
      sample: {offering: {from: cks-medium, to: cks-large}, root_disk_gb: {from: 20, to: 30}}
    cordoned_by_others:
      description: Whether someone else had cordoned the node before (it stays cordoned).
      type: bool
    error:
      description: The failed step, the message, and what CloudStack or Kubernetes answered.
      type: dict
failed_nodes:
  description: The nodes whose cycle failed.
  returned: mode=cycle
  type: list
  elements: str
uncordoned:
  description:
    - Nodes outside the batch that a rollout which stopped had left cordoned and that are back, uncordoned
      before the batch started (in check mode, those it would uncordon), each with C(node) and C(why).
  returned: mode=cycle
  type: list
  elements: dict
  sample: [{node: prod-node-2a1f, why: Ready with a new boot ID}]
release:
  description: What release did.
  returned: mode=release
  type: dict
  contains:
    uncordoned:
      description: The nodes uncordoned (and their annotation removed), each with C(node) and C(why).
      type: list
      elements: dict
    left_cordoned:
      description: The annotated nodes left cordoned, each with C(node) and C(why).
      type: list
      elements: dict
    cordoned_by_others:
      description: Nodes cordoned without the rollout's annotation; never touched.
      type: list
      elements: str
    capacity:
      description:
        - C(cores) and C(memory_mb) counted from the VMs' actual offerings, and C(cloudstack_cores),
          C(cloudstack_memory_mb) as CloudStack reports them for the cluster (stale after a rollout).
      type: dict
      sample: {cores: 18, memory_mb: 36864, cloudstack_cores: 14, cloudstack_memory_mb: 28672}
    outcome:
      description: V(Running) or V(Alert), as stored in the record.
      type: str
    problems:
      description: Why the outcome is V(Alert).
      type: list
      elements: str
    last_error:
      description: The last error stored in the record; V(null) when cleared.
      type: str
    lock_released:
      description: Whether the lock was given back now.
      type: bool
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cloudstack.cks.plugins.module_utils import ansible_module as glue
from ansible_collections.cloudstack.cks.plugins.module_utils.cluster import ClusterLoader
from ansible_collections.cloudstack.cks.plugins.module_utils.cycle import node_cycle
from ansible_collections.cloudstack.cks.plugins.module_utils.release import node_release


def argument_spec() -> dict[str, dict[str, Any]]:
    return glue.cluster_module_argument_spec({
        "mode": {"type": "str", "choices": ["cycle", "release"], "default": "cycle"},
        "nodes": {"type": "list", "elements": "str"},
        "settings": {"type": "dict"},
        "batch_timeout": {"type": "float", "default": 1800.0},
        "job_timeout": {"type": "float", "default": 900.0},
        "delete_emptydir_data": {"type": "bool", "default": False},
        "force": {"type": "bool", "default": False},
        "grace_period": {"type": "int"},
        "eviction_retry_interval": {"type": "float", "default": 5.0},
        "poll_interval": {"type": "float", "default": 0.5},
        "etcd_endpoints": {"type": "list", "elements": "str", "default": []},
        "etcd_ca_cert": {"type": "path"},
        "etcd_client_cert": {"type": "path"},
        "etcd_client_key": {"type": "path", "no_log": False},
        "etcd_validate_certs": {"type": "bool", "default": True},
        "etcd_timeout": {"type": "float", "default": 5.0},
        "lock_holder": {"type": "str"},
        "last_error": {"type": "str"},
        "skipped": {"type": "list", "elements": "str", "default": []},
    })


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_if=[("mode", "cycle", ("nodes",))],
        required_together=[("etcd_client_cert", "etcd_client_key")],
        supports_check_mode=True,
    )

    def work() -> dict[str, Any]:
        cloud = glue.cloudstack_client(module)
        cluster_id = None
        if module.params.get("kubeconfig") is None:
            # The kubeconfig is fetched from CloudStack by the cluster's id.
            cluster_id = ClusterLoader(cloud).find(module.params["cluster"], module.params.get("project_id"))["id"]
        kube = glue.kube_client(module, cloud, cluster_id)
        try:
            service = node_release if module.params["mode"] == "release" else node_cycle
            return service(module.params, cloud, kube, check_mode=module.check_mode)
        finally:
            kube.close()

    glue.run(module, work)


if __name__ == "__main__":
    main()
