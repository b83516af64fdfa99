#!/usr/bin/python
# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: cks_node_cycle
short_description: Restart one batch of CKS nodes with their node type's settings, validate, or release a rollout
version_added: 0.1.0
description:
  - With O(mode=cycle), restarts the nodes of one batch (O(nodes)) of a CloudStack Kubernetes Service cluster with
    the settings of their node type - service offering, root disk size, affinity groups. The nodes of the batch go
    through the steps side by side - preflight (for the whole batch, before anything changes), annotate and cordon,
    the load-balancer exclusion (O(exclude_from_load_balancers)), drain (through the Eviction API, as
    C(kubectl drain) does), stop, change (only what differs), start, verify (Ready with a new boot ID) and
    uncordon - and then the whole cluster is validated (O(validate_count)).
  - One deadline, O(batch_timeout), covers the batch. A failure at any step leaves the node as it is, and the task
    fails naming the node, the step and what CloudStack or Kubernetes answered; run O(mode=release) afterwards.
    The one exception is a change CloudStack refuses once the VM is stopped, or a start its deployment planner
    refuses after the change - the node is started again on what it had and returned to service before the task
    fails (O(put_back_on_refusal)).
  - With O(phase), a batch runs in three runs (V(cordon), V(restart), V(uncordon)) so that tasks of the operator can
    run on each node between them (the rollout role's per-node hooks).
  - With O(mode=release), ends a rollout however it ended - uncordons the nodes that are back, leaves the others
    cordoned and says why, recounts the cluster's capacity, records the outcome and the last error (from O(rollout)), and gives back
    the lock. With O(mode=taint_pending), puts the C(cloudstack.apache.org/rollout-pending:PreferNoSchedule) taint
    on O(nodes) before the first batch.
  - With O(mode=unlock), frees the lock of a rollout whose controller is gone (its host down, its job's pod deleted) -
    the holder named by O(lock_holder) must hold the lock; unless it is provably gone already (its lease expired, or
    its processes on this host are no longer running), the lease is watched for a third of its duration (plus 2
    seconds) and the unlock is refused if it is renewed meanwhile - a batch at work renews it, so a running rollout
    is never broken. The lock is then taken with a write conditional on the version watched and the release runs
    (the nodes that are back uncordoned, the others left cordoned with why, the outcome and why recorded, the lock
    given back). Used by the C(cloudstack.cks.unlock) playbook.
  - A batch run (O(mode=cycle)) whose controller is gone - the playbook killed, an AWX job cancelled (ansible-runner
    SIGKILLs ansible-playbook's process group; the run lives on in its worker's own session) - finishes its batch
    (no node of it left Stopped, each either finished or put back, the nodes that are back uncordoned), then runs
    the release itself with the last error "the controller went away during batch N of M", and fails.
  - Each step in detail, and the reasons behind it, are in the collection's guide C(docs/docsite/rst/node_cycle.rst)
    (How a batch is cycled).
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
    description:
      - O(mode=cycle) runs the preflight (it only reads) and returns the steps it would run for each node,
        with the changes it would make, without changing anything.
      - O(mode=release) returns what it would uncordon and record, without changing anything.
      - O(mode=taint_pending) returns the nodes it would taint.
      - Check mode does not validate (nothing changed to validate).
  diff_mode:
    support: none
    description: The changes of each node are in RV(nodes[].changes) instead, with their before and after values.
options:
  mode:
    description:
      - What this run does (see the description). Each choice is a job of its own with its own options.
      - V(cycle) restarts the nodes of O(nodes), one batch (or one O(phase) of it), and validates the cluster after it.
      - V(release) ends the rollout however it ended - uncordons what is back, records the outcome, gives back the lock.
      - V(taint_pending) taints the nodes of O(nodes) as waiting their turn, before the first batch.
      - V(unlock) takes over the lock of the holder O(lock_holder) names, whose controller is gone, and releases its
        rollout.
    type: str
    choices: [cycle, release, taint_pending, unlock]
    default: cycle
  nodes:
    description:
      - The nodes of one batch, by Kubernetes node name (the VM name in lowercase; case does not matter).
      - All of one node type; control and etcd nodes one at a time. Required with O(mode=cycle).
      - With O(mode=taint_pending), the nodes the rollout will restart (required); names that are no
        Kubernetes node (external etcd VMs) are left out.
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
      - With phases, counted from the start of the batch's V(cordon) run (as O(rollout) carries it); a V(restart)
        phase that starts after the deadline fails at its preflight, before anything is drained.
    type: float
    default: 1800
  phase:
    description:
      - Which part of the batch this run does. The three phases run in order, each after the one before succeeded for
        the whole batch, so that tasks of the operator can run on each node between them. Only with O(mode=cycle).
      - V(all) runs the whole batch in one run.
      - V(cordon) annotates and cordons the nodes (and labels them out of the load balancers).
      - V(restart) drains, stops, changes, starts and verifies the nodes; the batch's deadline counts from its
        V(cordon) run.
      - V(uncordon) checks that each node is still back, uncordons it, and validates the cluster.
    type: str
    choices: [all, cordon, restart, uncordon]
    default: all
  job_timeout:
    description:
      - Seconds each CloudStack async job (stop, resize, affinity, start) may take, cut down to what the
        batch has left.
    type: float
    default: 900
  delete_emptydir_data:
    description:
      - Evict pods that use C(emptyDir) volumes too; their data is lost. This is what CKS's own drain does
        (its upgrade and scale-down run C(kubectl drain --ignore-daemonsets --delete-emptydir-data)).
      - Set to V(false) to have such a pod stop the drain instead.
    type: bool
    default: true
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
      - For a CloudStack async job it is the pause between two polls of a job running late. A job is first
        polled about when the same command's jobs end (learned from the jobs before, in this batch or in the
        earlier batches of O(rollout)), at the end of what they are known to take when that is known to a tenth of
        it, else in its middle and, still running, at its end. A job still running then is polled once more
        a tenth of its time later (at most this interval), then after this interval, each pause half as long
        again as the one before, up to 4 seconds, with one last poll at the deadline. A command not seen yet
        is first polled after this interval.
    type: float
    default: 0.5
  validate_count:
    description:
      - How many consecutive validation rounds must pass after the batch's nodes are done (kOps's
        C(--validate-count)); V(0) turns validation off.
      - One round is the default - it only reads (the node list, C(/readyz), and etcd if O(etcd_endpoints) is
        given). Raise it for a cluster whose health flaps, so a passing round must hold O(validate_interval)
        seconds later too.
    type: int
    default: 1
  validate_interval:
    description:
      - Seconds between two validation rounds (from the end of one to the start of the next), after a passing
        round (to see that it holds) and after a failing one (to try again).
    type: float
    default: 10
  validate_timeout:
    description:
      - Seconds within which the validation rounds must start; when the rounds needed have not passed by then,
        the batch fails at step C(validate). The first round always runs. Not counted in O(batch_timeout).
    type: float
    default: 300
  exclude_from_load_balancers:
    description:
      - Label each node C(node.kubernetes.io/exclude-from-external-load-balancers) before its drain, and take
        the label off again with the uncordon after verify (see the description). A label the node already
        had is left alone.
    type: bool
    default: false
  exclude_delay:
    description:
      - With O(exclude_from_load_balancers), seconds to wait after the drain before the VM is stopped, for the
        load balancers to stop sending the node traffic. The label goes on before the drain, so the service
        controller has the drain's time as well.
    type: float
    default: 10
  put_back_on_refusal:
    description:
      - When CloudStack refuses a change of a node's stopped VM (an error code 4xx or 53x from
        C(changeServiceForVirtualMachine), C(resizeVolume) or C(updateVMAffinityGroup)), start the VM again on what
        it has now, wait until the node is back (Ready with a new boot ID, etcd healthy for a member), uncordon it
        if the rollout cordoned it, and then fail the batch with CloudStack's answer, naming the node and the
        change. The node stays out of date, so the next run changes it.
      - If V(false), the node is left Stopped and cordoned for the operator to look at first; a rerun resumes it.
      - A start the deployment planner refuses after this run changed the node's affinity groups or offering (533,
        or 530/531 from the planner - a strict host anti-affinity group with no host left for it, no host with room
        for the new offering) is put back the same way, after its previous groups and offering are restored (a grown
        root disk stays grown); the batch fails with CloudStack's answer and the reason. A start that fails with
        nothing of this run to undo leaves the node Stopped and cordoned. A change that did not answer in time is no
        refusal (it may still be carried out) and is left alone.
      - Nodes of one batch that share a strict host affinity or anti-affinity group are started one after another,
        each once the one before is Running, never at the same moment.
    type: bool
    default: true
  live_scale:
    description:
      - V(never) (the default) restarts every node (cordon, drain, stop, change, start).
      - V(auto) grows a node without a restart when its only change is a service offering CloudStack can apply
        to the running VM (read before anything changes; what cannot be read restarts) - a scale up, on a
        hypervisor that scales running VMs, both offerings with the same dynamic scaling flag, the VM
        dynamically scalable, C(enable.dynamic.scale.vm) true, and before CloudStack 4.23 a custom current
        offering on KVM. Root disk and affinity group changes always restart; so does a batch run in phases.
      - The live path, with no cordon and no drain - C(scaleVirtualMachine) of the running VM; through a short-lived
        privileged pod pinned to the node (O(live_scale_image), C(hostPID), C(nsenter) into PID 1, in
        C(kube-system), deleted afterwards) a check that the guest has the new vCPUs and memory online, then a
        kubelet restart; then a wait of at most O(live_scale_timeout) seconds until the node reports the new CPU
        count and at least the offering's memory less what the kubelet and kernel kept before, Ready, with the
        same boot ID.
      - A live scale CloudStack refuses, a domain started without room for the new vCPUs, a guest that does not
        online them, or a node that does not report them takes the restart path in the same batch, with the
        reason in the node's C(changes.path).
    type: str
    choices: [never, auto]
    default: never
  live_scale_image:
    description:
      - The image of the live path's pod. It needs C(nsenter) and C(sleep) (busybox has both); on a cluster without
        a registry, an image the nodes hold.
    type: str
    default: busybox:1.36.1
  live_scale_timeout:
    description:
      - Seconds the live path waits for the node to report its new size after the kubelet restart, before the node
        takes the restart path.
    type: float
    default: 120
  max_unavailable:
    description:
      - With O(mode=cycle), the most workers one batch may take down, clamped as a rollout's plan clamps it,
        C(min(max_unavailable, workers - 1)), and at least 1. A batch of more workers is refused by its
        preflight, before anything changes.
      - If not given, the value the rollout stored (with M(cloudstack.cks.cks_node_settings)), else 1.
    type: int
  lock_holder:
    description:
      - The holder identity of the rollout lock (the run id the rollout took it with).
      - With O(mode=cycle) or O(mode=taint_pending), nothing is changed unless this holder still holds the lock,
        which is renewed.
      - With O(mode=release), the lock is given back if this holder holds it (else left alone).
      - With O(mode=unlock) (required), the holder to take the lock from, as a refusal or the C(status) playbook names it.
      - If not given, the C(run_id) of O(rollout); without either, the lock is neither checked nor released.
    type: str
  rollout:
    description:
      - The rollout's state, as the previous run of this module returned it (RV(rollout)); the rollout role keeps
        it in one fact and passes it to every run. It carries the rollout's C(run_id) (the lock holder), the
        lock's version as the last run renewed it (renewed again in one conditional write), what the earlier
        batches' CloudStack jobs took (each first poll of a stop or start is aimed by it), the plan's summary,
        the batches run with their outcome and node results, and the node types skipped.
      - With O(mode=cycle), the run records its batch in it and returns it. A O(phase) after V(cordon) counts
        O(batch_timeout) from the batch's V(cordon) run it finds there.
      - With O(mode=release), how the rollout ended (V(done), V(failed at batch 2 of 5),
        V(cancelled before batch 3 of 5)) and its last error are read from its last batch, else from its
        C(last_error) (as a rollout that failed before its first batch passes it); none clears the record's last
        error. The report is made from it when it carries a plan.
      - Omitted, a run stands alone, as a direct call of the module needs.
    type: dict
  report_path:
    description:
      - With O(mode=release) and a O(rollout) that planned, the file the report is written to as JSON (mode 0600, written whole
        or not at all - to a file beside it, then renamed), on the controller. Not written in check mode.
      - A report that cannot be written does not fail the release; RV(report_error) says why.
      - Beside it, with C(.svg) for its extension, the rollout's timeline as a picture drawn from the report alone
        (RV(timeline_path)) - per batch its nodes, each node's path and steps on a time axis, each wait named (a
        PodDisruptionBudget, the deployment planner, the API limit). One that cannot be written is a warning.
    type: path
notes:
  - A batch of a control node with stacked etcd or of an external etcd node checks etcd (the quorum preflight and
    the member's verify) through O(etcd_endpoints) when given; else through the Kubernetes API, etcdctl in the etcd
    pods over pods/exec (stacked) or in a short-lived pod on a control node (external etcd nodes, deleted after
    each check). Other batches use O(etcd_endpoints) only to validate.
  - Nodes are restarted, not changed live - an offering change, a larger root disk (grown by cloud-init at boot)
    and new affinity groups all take effect the same way on every hypervisor.
  - While a node VM is stopped, CKS's state scanner moves the cluster to V(Alert); it returns to V(Running) by
    itself once every node is Ready again. The module tolerates that Alert.
  - The cycle marks a node with the annotation C(cloudstack.apache.org/rollout-stop-sent) just before it stops its
    VM, so that O(mode=release) can tell a node that never went down (uncordoned) from one whose Ready may be the
    stale one from before the stop (left cordoned). Both annotations go when the node is uncordoned.
  - The Kubernetes access needed is in C(docs/docsite/rst/rbac.rst) of the collection; the taint and the labels are node
    patches, validation reads the nodes and C(/readyz).
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

- name: Restart a batch of workers out of the load balancers, validated twice 10 seconds apart afterwards
  cloudstack.cks.cks_node_cycle:
    cluster: prod
    nodes: "{{ ansible_play_batch }}"
    lock_holder: "{{ rollout_id }}"
    exclude_from_load_balancers: true
    exclude_delay: 15
    validate_count: 2
    validate_interval: 10
    validate_timeout: 600

- name: Cordon a batch, then run a task of your own on each node before the drain
  cloudstack.cks.cks_node_cycle:
    cluster: prod
    nodes: "{{ ansible_play_batch }}"
    lock_holder: "{{ rollout_id }}"
    phase: cordon
  delegate_to: localhost
  run_once: true
  register: cordoned

- name: Drain, restart and verify the batch (after your task), with the batch's deadline from its start
  cloudstack.cks.cks_node_cycle:
    cluster: prod
    nodes: "{{ ansible_play_batch }}"
    lock_holder: "{{ rollout_id }}"
    phase: restart
    # The cordon run's rollout object: the batch's deadline counts from the cordon run's start.
    rollout: "{{ cordoned.rollout }}"
  delegate_to: localhost
  run_once: true

- name: Taint the nodes the plan will restart, so evicted pods prefer other nodes
  cloudstack.cks.cks_node_cycle:
    cluster: prod
    mode: taint_pending
    nodes: "{{ plan.hosts }}"
    lock_holder: "{{ rollout_id }}"

- name: End the rollout, whatever happened
  cloudstack.cks.cks_node_cycle:
    cluster: prod
    mode: release
    # The last batch's rollout object: its outcome, and the last error, are recorded.
    rollout: "{{ cycled.rollout | default({'run_id': rollout_id}) }}"

- name: Free the lock of a rollout whose controller host is gone, and release it
  cloudstack.cks.cks_node_cycle:
    cluster: prod
    mode: unlock
    lock_holder: awx-job-4711
"""

RETURN = r"""
unlocked:
  description:
    - The holder whose lock was taken (O(mode=unlock)) - C(holder), its C(controller) (C(host), C(pid), C(started),
      C(awx_job)), the C(batch) it was in, when its lock would have ended (C(ends)) and why it was judged gone (C(gone)).
  returned: mode=unlock, when a lock was taken
  type: dict
  sample: {"holder": "awx-job-4711", "controller": {"host": "awx-ee-7", "pid": 812, "started": "2026-12-05T12:00:01Z",
           "awx_job": "4711"}, "batch": "batch 2 of 4 (prod-node-2)", "batch_nodes": ["prod-node-2"],
           "batch_started": "2026-12-05T12:04:10Z", "ends": "2026-12-05T12:06:40.000000Z", "gone": null}
lock_version:
  description: The rollout lock's resourceVersion as this run's last renewal left it (RV(rollout) carries it on).
  returned: mode=cycle, with O(lock_holder)
  type: str
  sample: "48213"
rollout:
  description:
    - The rollout object (O(rollout)) with this run recorded in it - its batch with the outcome, the node results,
      the lock's version and the jobs' timings; pass it to the next run. Also returned when the batch failed.
  returned: mode=cycle
  type: dict
  sample: {version: 1, run_id: rollout-20261203T101500-42, lock_version: "48213", batches: [{batch: 1, outcome: done}]}
batch:
  description: The nodes of the batch, in lowercase.
  returned: mode=cycle
  type: list
  elements: str
  sample: [prod-node-2a1f, prod-node-9c3e]
phase:
  description: The O(phase) this run did.
  returned: mode=cycle
  type: str
  sample: all
started:
  description: Unix time this run started the batch (RV(rollout) carries it to the batch's later phases).
  returned: mode=cycle
  type: float
  sample: 1767000000.25
ended:
  description: Unix time this run ended.
  returned: mode=cycle
  type: float
  sample: 1767000062.5
preflight:
  description:
    - What the preflight checked (cluster state, etcd quorum verdict, C(/readyz/etcd) status).
    - C(api_server_elsewhere) (external etcd, a control node in the batch) is true when another control node's API
      server serves - its C(kube-system/kube-apiserver-<node>) pod is Ready, which kubeadm's readiness probe of that
      API server's own C(/readyz) decides.
    - C(stop_refusals) lists the changes CloudStack would refuse only once a VM is stopped (affinity groups the key
      may not send, the owner's CPU, memory or primary-storage limit, the offering's state or storage fit); any
      fails the batch here, before a node is cordoned. C(not_checked) says what the key could not read.
    - C(placement_refusals) lists the strict affinity groups whose members CloudStack's deployment planner could not
      all place (the zone's Up and Enabled hosts with room, read again here as a host may have gone into Maintenance
      since the plan); any fails the batch here too. A key that cannot list hosts gets a C(not_checked) note.
    - C(notes) says what the batch did about a CKS operation before it started - how long it waited while CKS held
      the cluster (V(Scaling), V(RemovingNodes), e.g. the cluster autoscaler's scale), the nodes of the batch no longer
      in the cluster (also in C(dropped)), the nodes the cluster autoscaler added that it marked scale-down-disabled.
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
      description:
        - V(done), V(failed), or V(would_cycle) in check mode.
        - After O(phase=cordon) V(cordoned), after O(phase=restart) V(restarted) (verified, still cordoned).
      type: str
    steps:
      description:
        - The steps in order, each with C(name) (annotate, cordon, exclude_from_lb, drain, lb_wait, stop,
          change_offering, resize_root_disk, update_affinity_groups, start, verify, recheck, uncordon, unmark), C(started)
          and C(ended) (Unix times), C(outcome) (V(ok), V(skipped), V(failed); V(would_run), V(would_skip) in check
          mode) and C(detail).
        - C(exclude_from_lb) and C(lb_wait) appear only with O(exclude_from_load_balancers); C(unmark) only for a
          node cordoned by someone else that carries the rollout's marks; C(recheck) only with O(phase=uncordon).
        - Each phase returns its own steps (O(phase)).
        - With O(live_scale=auto), a node on the live path has C(guest_check), C(scale_live), C(guest_sees),
          C(kubelet_restart) and C(node_reports) instead; one that fell back has those up to the failed one, then
          the restart path's.
      type: list
      elements: dict
    changes:
      description:
        - What changed (or would change), C(from) and C(to) - C(offering) (names, with C(from_id), C(to_id)),
          C(root_disk_gb), C(affinity_groups) (names, with ids); and C(drain) (the pods evicted).
        - With O(live_scale=auto), C(path) - C(path) (V(live) or V(restart)) and C(reason); a node that fell back
          from the live path has C(fell_back_from=live), one that grew live C(capacity) (what its node reports).
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
retries:
  description:
    - What the clients sent again after a transient fault (a 5xx, a 429 with its Retry-After, a dropped
      connection) while this run did the batch, C(total) and per API (C(cloudstack), C(kubernetes)) C(retries),
      C(by_action) (counts), C(lost_answers_settled) (writes whose answer was lost, settled by reading what they
      change - polled, found done, or sent again) and C(recent) (the last few, with their cause).
  returned: mode=cycle
  type: dict
  sample: {total: 2, kubernetes: {retries: 2, by_action: {list nodes: 1, patch node prod-node-2a1f: 1}}}
node_events:
  description:
    - The Kubernetes Events this run wrote about its nodes, in C(default), reported by C(cloudstack.cks/rollout) -
      cordoned, drain started, eviction blocked by a PodDisruptionBudget, drained, VM stopped, changed, started,
      back Ready, uncordoned, put back, left cordoned and why. C(written) new Events, C(repeats) occurrences
      counted in an Event's series instead of a new Event, C(failed) Events that could not be written (each run
      with failures also warns; the batch goes on) and C(error) the first failure.
    - With O(mode=release), the release's own - each node it uncordoned, each it left cordoned and why.
  returned: mode=cycle, not in check mode; mode=release when it wrote (or failed to write) any
  type: dict
  sample: {written: 9, repeats: 3, failed: 0}
jobs:
  description:
    - The CloudStack async jobs of this run. C(polls) is the number of queryAsyncJobResult polls in all,
      C(waits) one entry per job (C(command), C(jobid), C(target), C(polls), C(seconds) it took, C(aimed)
      when its first poll went, C(running_at) the last poll that saw it running or V(null)), and
      C(job_seconds) per command C([after, by]) as learned, carried in RV(rollout) to the next batch.
  returned: mode=cycle
  type: dict
  sample: {polls: 3, waits: [{command: stopVirtualMachine, jobid: 0c6f..., target: prod-node-2a1f, polls: 1, seconds: 10.9,
                              aimed: 10.9, running_at: null}],
           job_seconds: {stopVirtualMachine: [10.2, 10.9], resizeVolume: [1.4, 2.0], startVirtualMachine: [15.1, 16.0]}}
validation:
  description: The validation after the batch; V(null) when it did not run (off, check mode, or a node failed).
  returned: mode=cycle
  type: dict
  contains:
    count:
      description: The consecutive passing rounds needed (O(validate_count)).
      type: int
    interval:
      description: O(validate_interval).
      type: float
    timeout:
      description: O(validate_timeout).
      type: float
    ok:
      description: Whether the cluster validated.
      type: bool
    passes:
      description: Consecutive passing rounds at the end.
      type: int
    rounds:
      description:
        - Each round with C(started) and C(ended) (Unix times), C(ok), C(problems) (the nodes and components not
          healthy) and C(notes) (etcd members down while the quorum holds).
      type: list
      elements: dict
    started:
      description: Unix time.
      type: float
    ended:
      description: Unix time.
      type: float
  sample:
    count: 1
    interval: 10
    timeout: 300
    ok: true
    passes: 1
    rounds: [{started: 1767000000.1, ended: 1767000000.3, ok: true, problems: [], notes: ""}]
pending_taint:
  description: What O(mode=taint_pending) did.
  returned: mode=taint_pending
  type: dict
  contains:
    key:
      description: The taint key, C(cloudstack.apache.org/rollout-pending).
      type: str
    effect:
      description: C(PreferNoSchedule).
      type: str
    tainted:
      description: The nodes tainted now (would be, in check mode).
      type: list
      elements: str
    already_tainted:
      description: The nodes that had the taint already.
      type: list
      elements: str
    not_kubernetes_nodes:
      description: Names given that are no Kubernetes node (external etcd VMs), left out.
      type: list
      elements: str
release:
  description: What release did.
  returned: mode=release (and mode=unlock, the release it ran)
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
      description: Nodes cordoned without the rollout's annotation; never uncordoned.
      type: list
      elements: str
    pending_taint_removed:
      description: The nodes the pending taint was taken off.
      type: list
      elements: str
    lb_exclusion_removed:
      description: The nodes whose load-balancer exclusion label (the rollout's) was taken off.
      type: list
      elements: str
    lb_exclusion_kept:
      description: The nodes that keep the rollout's load-balancer exclusion (down or left cordoned), each with
        C(node) and C(why).
      type: list
      elements: dict
    scale_down_restored:
      description: The nodes whose C(cluster-autoscaler.kubernetes.io/scale-down-disabled) mark the rollout had put on
        were given back what they had (the annotation taken off, or its earlier value put back).
      type: list
      elements: str
    capacity:
      description:
        - C(cores) and C(memory_mb) counted from the VMs' actual offerings, and C(cloudstack_cores),
          C(cloudstack_memory_mb) as CloudStack reports them for the cluster (stale after a rollout).
      type: dict
      sample: {cores: 18, memory_mb: 36864, cloudstack_cores: 14, cloudstack_memory_mb: 28672}
    outcome:
      description: V(Running) or V(Alert), as stored in the record (the cluster's health after the release).
      type: str
    result:
      description: How the rollout ended, as stored in the record (from O(rollout)).
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
    retries:
      description: What the clients sent again during the release, as RV(retries) of a batch.
      type: dict
    unfinished:
      description:
        - The release's steps that kept failing for the release's two minutes (C(step), C(error)); empty when
          it finished. When not empty the task fails, and its message says what is left (the lock held until
          its lease expires, the nodes still cordoned).
      type: list
      elements: dict
    lock_held_by:
      description:
        - Another rollout that holds the lock now (it took it over after the lock of O(lock_holder) expired),
          with C(holder), C(since) and C(renew_time). The release then changed nothing at all (no uncordon,
          no annotation, taint or outcome touched, as they are that rollout's), and C(outcome) is V(unchanged).
        - V(null) otherwise.
      type: dict
after:
  description:
    - What is still out of date after the release, judged against the stored node settings, with the keys
      M(cloudstack.cks.cks_node_outdated) returns them - C(out_of_date) (the node names), C(node_types) (per node
      type, C(nodes) and C(out_of_date)), C(controlnodesoutofdate), C(workernodesoutofdate) and
      C(etcdnodesoutofdate). The rollout role reports it without reading the cluster again.
    - With the cluster autoscaler on, C(autoscaler) - C(minsize), C(maxsize), C(added) (the nodes it added during the
      rollout), C(added_out_of_date) (those of them still out of date) and C(words) (the line the outcome shows).
    - V(null) when the cluster could not be read.
  returned: mode=release (and mode=unlock, the release it ran)
  type: dict
  sample: {out_of_date: [], node_types: {control: {nodes: 3, out_of_date: 0}, worker: {nodes: 10, out_of_date: 0},
           etcd: {nodes: 0, out_of_date: 0}}, controlnodesoutofdate: 0, workernodesoutofdate: 0, etcdnodesoutofdate: 0}
report:
  description:
    - With a O(rollout) that planned, the rollout report (as the C(cloudstack.cks.rollout_report) filter makes it), ended now.
  returned: mode=release, with a O(rollout) that planned
  type: dict
  sample: {run_id: rollout-20261203T101500-42, outcome: Running, result: done, last_error: null, nodes: []}
report_path:
  description: Where the report was written.
  returned: mode=release, when the report was written
  type: str
  sample: /var/lib/awx/reports/prod-k8s.json
timeline_path:
  description: Where the timeline picture (SVG) of the report was written, beside O(report_path).
  returned: mode=release, when the report and its picture were written
  type: str
  sample: /var/lib/awx/reports/prod-k8s.svg
report_error:
  description: Why the report could not be written to O(report_path) (the release itself was done).
  returned: mode=release, when the report could not be written
  type: str
  sample: "the rollout report could not be written to /ro/report.json: Read-only file system"
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cloudstack.cks.plugins.module_utils import ansible_module as glue
from ansible_collections.cloudstack.cks.plugins.module_utils._common.option_defaults import argument_specs
from ansible_collections.cloudstack.cks.plugins.module_utils._services.cycle import node_cycle
from ansible_collections.cloudstack.cks.plugins.module_utils._services.release import node_release
from ansible_collections.cloudstack.cks.plugins.module_utils._services.taint import taint_pending
from ansible_collections.cloudstack.cks.plugins.module_utils._services.unlock import node_unlock

SERVICES = {"cycle": node_cycle, "release": node_release, "taint_pending": taint_pending, "unlock": node_unlock}

BATCH_OPTIONS_SPEC = argument_specs(
    "batch_timeout", "job_timeout", "delete_emptydir_data", "force", "grace_period", "eviction_retry_interval",
    "poll_interval", "validate_count", "validate_interval", "validate_timeout", "exclude_from_load_balancers",
    "exclude_delay", "put_back_on_refusal", "max_unavailable", "live_scale", "live_scale_image", "live_scale_timeout")


def argument_spec() -> dict[str, dict[str, Any]]:
    return glue.cluster_module_argument_spec({
        "mode": {"type": "str", "choices": ["cycle", "release", "taint_pending", "unlock"], "default": "cycle"},
        "nodes": {"type": "list", "elements": "str"},
        "settings": {"type": "dict"},
        # The batch's options, with their types and defaults from their one table.
        **BATCH_OPTIONS_SPEC,
        "phase": {"type": "str", "choices": ["all", "cordon", "restart", "uncordon"], "default": "all"},
        **glue.etcd_argument_spec(),
        "lock_holder": {"type": "str"},
        "rollout": {"type": "dict"},
        "report_path": {"type": "path"},
    })


def module_options() -> dict[str, Any]:
    """AnsibleModule's arguments, written once for main() and for the action that runs this module
    in the controller (plugins/action/cks_node_cycle.py)."""
    return {"argument_spec": argument_spec(),
            "required_if": [("mode", "cycle", ("nodes",)), ("mode", "taint_pending", ("nodes",)),
                            ("mode", "unlock", ("lock_holder",))],
            "required_together": [("etcd_client_cert", "etcd_client_key")], "supports_check_mode": True}


def run(module: glue.ModuleHost) -> None:
    glue.run_service(module, SERVICES[module.params["mode"]])


def main() -> None:
    run(AnsibleModule(**module_options()))


if __name__ == "__main__":
    main()
