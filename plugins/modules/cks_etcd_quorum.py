#!/usr/bin/python
# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: cks_etcd_quorum
short_description: Tell whether etcd keeps its quorum without the given members
version_added: 0.1.0
description:
  - Answers whether a quorum of a CKS cluster's voting etcd members would stay healthy if the members named in
    O(going_down) went down. It asks etcd one of two ways.
  - 'Through the Kubernetes API (no O(etcd_endpoints)): C(etcdctl) runs inside the etcd pod (C(etcd-<node>) in
    C(kube-system), kubeadm''s static pod) of a control node that is not going down, through C(pods/exec), with the
    pod''s own certificates - C(member list), C(endpoint health --cluster) (a linearizable read on every member) and
    C(endpoint status --cluster), each with C(-w json). The Kubernetes client comes from O(kubeconfig) (or
    O(kube_host) and O(kube_api_key)); without them the cluster named in O(cluster) is looked up in CloudStack and
    its own kubeconfig is used, as the other modules of the collection do. This is the stacked etcd of a kubeadm
    control plane, CKS''s default. A pod that cannot be asked (exec refused, the pod missing, its node down, the
    member killed) is passed over for the next; when none answers, the task fails with each pod''s reason.'
  - 'Directly (O(etcd_endpoints) given, which takes precedence): the v3 JSON gateway (C(POST /v3/cluster/member/list))
    of the first endpoint that answers, then every member on its own client URL (C(GET /readyz) where etcd has it,
    else C(GET /health) - etcd 3.4 before 3.4.29 has no C(/readyz)). This is the way for CKS external etcd nodes,
    which run outside Kubernetes, from a host on the cluster network.'
  - 'The rule: with V(n) voting members the quorum is V(q = n // 2 + 1). The members in O(going_down)
    count as down whatever their state; every other voting member counts only if it is healthy now.
    The answer is safe when at least V(q) of those remain. Members already unhealthy therefore use up
    the tolerance before the ones going down do: with 3 members all must be healthy before one goes
    down, and never two at once; with 5 members and one already down, one more may go down.'
  - Learners are listed and probed but do not count, because they do not vote. A member that was
    added but never started counts as a voter that is down (it raises the quorum).
  - With O(require_ready), etcd must also answer a linearizable read now, as C(etcdctl endpoint health) does.
  - The module only reads; it never changes etcd, CloudStack or Kubernetes.
author:
  - cloudstack.cks contributors (@cloudstack-cks)
extends_documentation_fragment:
  - cloudstack.cks.cloudstack
  - cloudstack.cks.kubernetes
attributes:
  check_mode:
    support: full
    description: The module only reads, so it runs the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  idempotent:
    support: full
    description: It never changes anything.
options:
  cluster:
    description:
      - The CKS cluster, by id or by exact name, whose own kubeconfig (C(getKubernetesClusterConfig)) is used to
        reach its etcd pods when neither O(etcd_endpoints) nor O(kubeconfig) is given. Needs the CloudStack options.
      - Not needed with O(etcd_endpoints) or O(kubeconfig); given anyway (for example by C(module_defaults) of the
        C(cloudstack.cks.cks) group), it is not looked up.
    type: str
  project_id:
    description:
      - The id of the project the cluster belongs to, if it is in one.
    type: str
  etcd_endpoints:
    description:
      - etcd client URLs to ask directly for the member list, tried in turn until one answers, for example
        V(https://127.0.0.1:2379) on a control node of a cluster with stacked etcd or V(http://10.1.1.5:2379)
        for a CKS external etcd node. Given, they take precedence over the Kubernetes API.
      - The members are then probed on the client URLs the member list advertises, with the same TLS settings.
      - Empty, etcd is asked through the Kubernetes API (see the description).
    type: list
    elements: str
    default: []
    aliases: [endpoints]
  going_down:
    description:
      - Names of the etcd members about to go down. An etcd member is named after its node, the VM name
        in lowercase (kubeadm names stacked members after the node; CKS external etcd nodes likewise).
        Compared without case.
      - A name that is not a member is an error, so a typo cannot turn the question into a plain health check.
      - Through the Kubernetes API, the etcd pods on these nodes are not the ones asked.
      - Empty asks whether etcd has a healthy quorum now.
    type: list
    elements: str
    default: []
  etcd_ca_cert:
    description:
      - Path of the CA bundle that signed the etcd server certificates, for V(https://) O(etcd_endpoints).
      - For kubeadm (stacked etcd) V(/etc/kubernetes/pki/etcd/ca.crt). Without it the system CAs are used.
    type: path
    aliases: [ca_cert]
  etcd_client_cert:
    description:
      - Path of the client certificate etcd asks for (C(--client-cert-auth)), with O(etcd_endpoints).
      - For kubeadm V(/etc/kubernetes/pki/etcd/healthcheck-client.crt). Requires O(etcd_client_key).
    type: path
    aliases: [client_cert]
  etcd_client_key:
    description:
      - Path of the private key of O(etcd_client_cert).
      - For kubeadm V(/etc/kubernetes/pki/etcd/healthcheck-client.key). It is read, never returned.
    type: path
    aliases: [client_key]
  etcd_validate_certs:
    description:
      - If V(false), the etcd server certificates of O(etcd_endpoints) are not verified. A CA in O(etcd_ca_cert)
        is the better fix.
      - C(validate_certs) is the CloudStack option here, as in the other modules of the C(cloudstack.cks.cks) group.
    type: bool
    default: true
  etcd_timeout:
    description:
      - Seconds to wait for each answer of etcd (member list, one health probe, the read); through the Kubernetes
        API, C(etcdctl)'s dial and command timeouts. Members are probed at the same time, so the whole check
        takes about one timeout when some member does not answer.
    type: float
    default: 5
    aliases: [timeout]
  require_ready:
    description:
      - Also require that etcd answers a linearizable (quorum) read now. If it does not, the answer is not safe.
    type: bool
    default: true
  fail_when_unsafe:
    description:
      - If V(true), the task fails when the answer is not safe, with the reason in RV(msg) and the
        other return values still set. If V(false), it succeeds and RV(safe) says V(false).
    type: bool
    default: true
notes:
  - 'Access through the Kubernetes API: C(get) and C(create) on C(pods/exec) of the etcd pods in C(kube-system),
    and C(list) on C(pods) (docs/rbac.yml). CKS''s own kubeconfig has them.'
  - 'Directly on a real cloud, etcd listens only on the cluster network, so run the module on a control node,
    delegated over SSH (user V(cloud), the cluster''s SSH keypair, the node''s port-forwarding rule on the
    network''s public IP). There, use O(etcd_endpoints=https://127.0.0.1:2379) with
    O(etcd_ca_cert=/etc/kubernetes/pki/etcd/ca.crt), O(etcd_client_cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt)
    and O(etcd_client_key=/etc/kubernetes/pki/etcd/healthcheck-client.key) (readable by root, so use C(become)).'
  - For a cluster with external etcd nodes, the members serve plain HTTP on V(http://<node IP>:2379) and no pod runs
    on them; run the module on any node of the cluster network (a control node, delegated as above) with
    O(etcd_endpoints) and leave the TLS options out.
  - Environment proxies (E(HTTPS_PROXY) and the like) are not used for etcd.
  - Debian's etcd 3.4.23 answers the member list even without quorum, so the member list alone proves nothing;
    the per-member probes and the read do.
seealso:
  - name: etcd health endpoints
    description: What C(/health), C(/livez) and C(/readyz) check, by etcd version.
    link: https://etcd.io/docs/v3.5/op-guide/monitoring/
  - name: etcd failure tolerance
    description: Quorum and tolerated failures by cluster size.
    link: https://etcd.io/docs/v3.5/faq/
"""

EXAMPLES = r"""
- name: Would etcd keep quorum while this control node restarts? (through the Kubernetes API)
  cloudstack.cks.cks_etcd_quorum:
    api_url: https://cloud.example.com/client/api
    api_key: "{{ cloudstack_api_key }}"
    api_secret: "{{ cloudstack_api_secret }}"
    cluster: prod-k8s
    going_down: ["{{ node_name | lower }}"]

- name: The same with the connection options once for the whole group
  module_defaults:
    group/cloudstack.cks.cks:
      api_url: https://cloud.example.com/client/api
      api_key: "{{ cloudstack_api_key }}"
      api_secret: "{{ cloudstack_api_secret }}"
      cluster: prod-k8s
  block:
    - name: Is etcd healthy now?
      cloudstack.cks.cks_etcd_quorum:
        fail_when_unsafe: false
      register: etcd

    - name: Show the answer
      ansible.builtin.debug:
        msg: "{{ etcd.msg }} (tolerates {{ etcd.tolerates }} more)"

- name: With a kubeconfig only (no CloudStack call)
  cloudstack.cks.cks_etcd_quorum:
    kubeconfig: "{{ playbook_dir }}/prod-k8s.kubeconfig"
    going_down: [prod-k8s-control-18c5e5a5a3b]

- name: Directly, on another control node (stacked etcd)
  cloudstack.cks.cks_etcd_quorum:
    etcd_endpoints: [https://127.0.0.1:2379]
    etcd_ca_cert: /etc/kubernetes/pki/etcd/ca.crt
    etcd_client_cert: /etc/kubernetes/pki/etcd/healthcheck-client.crt
    etcd_client_key: /etc/kubernetes/pki/etcd/healthcheck-client.key
    going_down: ["{{ node_name | lower }}"]
  delegate_to: "{{ other_control_node }}"
  become: true

- name: Is the external etcd healthy? Report, do not fail
  cloudstack.cks.cks_etcd_quorum:
    etcd_endpoints:
      - http://10.1.1.21:2379
      - http://10.1.1.22:2379
      - http://10.1.1.23:2379
    fail_when_unsafe: false
"""

RETURN = r"""
safe:
  description: Whether a quorum of the other voting members stays healthy without O(going_down) (and, with O(require_ready), etcd is ready).
  returned: always
  type: bool
  sample: true
msg:
  description: The answer in words, with the arithmetic and the members that are unhealthy and why.
  returned: always
  type: str
  sample: "2 of 3 voting members healthy without k-control-18c5; 2 needed"
members:
  description: Every member of the member list, learners included, as probed.
  returned: success or when not safe
  type: list
  elements: dict
  contains:
    name:
      description: Member name (empty for a member added but never started).
      type: str
      sample: k-control-18c5
    id:
      description: Member ID in decimal, as the JSON gateway gives it (C(etcdctl) prints it in hex).
      type: str
      sample: "9048707997721485459"
    client_urls:
      description: Client URLs the member advertises.
      type: list
      elements: str
      sample: ["https://10.1.1.11:2379"]
    peer_urls:
      description: Peer URLs of the member.
      type: list
      elements: str
      sample: ["https://10.1.1.11:2380"]
    learner:
      description: Whether the member is a learner (does not vote).
      type: bool
      sample: false
    healthy:
      description: Whether the member's own health endpoint said it is healthy.
      type: bool
      sample: true
    reason:
      description: Why the member is not healthy; empty when it is.
      type: str
      sample: "/health HTTP 503: health=false"
going_down:
  description: O(going_down) without repeats.
  returned: success or when not safe
  type: list
  elements: str
  sample: [k-control-18c5]
voters:
  description: Number of voting members (learners excluded).
  returned: success or when not safe
  type: int
  sample: 3
quorum:
  description: Voting members needed for a quorum, V(voters // 2 + 1).
  returned: success or when not safe
  type: int
  sample: 2
healthy:
  description: Voting members healthy now.
  returned: success or when not safe
  type: int
  sample: 3
healthy_after:
  description: Voting members healthy now that are not in O(going_down).
  returned: success or when not safe
  type: int
  sample: 2
tolerates:
  description:
    - Further voting members that could fail after the O(going_down) members are down, without losing quorum
      (V(healthy_after - quorum)). Negative when quorum would already be lost.
  returned: success or when not safe
  type: int
  sample: 0
ready:
  description: Whether etcd answered a linearizable read; V(null) when O(require_ready=false).
  returned: success or when not safe
  type: bool
  sample: true
checked_through:
  description: How etcd was asked - V(etcd_endpoints) (directly) or V(pods/exec) (C(etcdctl) in an etcd pod;
    RV(msg) names the pod).
  returned: success or when not safe
  type: str
  sample: pods/exec
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cloudstack.cks.plugins.module_utils import ansible_module as glue
from ansible_collections.cloudstack.cks.plugins.module_utils._services.quorum import etcd_quorum

# The names this module had before it took the connection options; validate_certs is CloudStack's now.
_ALIASES = {"etcd_endpoints": "endpoints", "etcd_ca_cert": "ca_cert", "etcd_client_cert": "client_cert",
            "etcd_client_key": "client_key", "etcd_timeout": "timeout"}


def argument_spec() -> dict[str, dict[str, Any]]:
    spec: dict[str, dict[str, Any]] = {
        "cluster": {"type": "str"},
        "project_id": {"type": "str"},
        "going_down": {"type": "list", "elements": "str", "default": []},
        "require_ready": {"type": "bool", "default": True},
        "fail_when_unsafe": {"type": "bool", "default": True},
    }
    for name, option in glue.etcd_argument_spec().items():
        spec[name] = dict(option, aliases=[_ALIASES[name]]) if name in _ALIASES else option
    spec.update(glue.cloudstack_argument_spec())
    spec.update(glue.kubernetes_argument_spec())
    return spec


def module_options() -> dict[str, Any]:
    """AnsibleModule's arguments, written once for main() and for the action that runs this module
    in the controller (plugins/action/cks_etcd_quorum.py)."""
    return {"argument_spec": argument_spec(), "required_together": [("etcd_client_cert", "etcd_client_key")],
            "supports_check_mode": True}


def run(module: glue.ModuleHost) -> None:
    glue.run_quorum(module, etcd_quorum)


def main() -> None:
    run(AnsibleModule(**module_options()))


if __name__ == "__main__":
    main()
