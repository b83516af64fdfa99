#!/usr/bin/python
# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: cks_etcd_quorum
short_description: Tell whether etcd keeps its quorum without the given members
version_added: 0.1.0
description:
  - Asks a CKS cluster's etcd for its members (the v3 JSON gateway, C(POST /v3/cluster/member/list)),
    probes every member on its own client URL (C(GET /readyz) where etcd has it, else C(GET /health) -
    etcd 3.4 before 3.4.29 has no C(/readyz)), and answers whether a quorum of the voting members
    would stay healthy if the members named in O(going_down) went down.
  - 'The rule: with V(n) voting members the quorum is V(q = n // 2 + 1). The members in O(going_down)
    count as down whatever their state; every other voting member counts only if it is healthy now.
    The answer is safe when at least V(q) of those remain. Members already unhealthy therefore use up
    the tolerance before the ones going down do: with 3 members all must be healthy before one goes
    down, and never two at once; with 5 members and one already down, one more may go down.'
  - Learners are listed and probed but do not count, because they do not vote. A member that was
    added but never started counts as a voter that is down (it raises the quorum).
  - With O(require_ready), etcd must also answer a linearizable read now, as C(etcdctl endpoint health) does.
  - The module only reads; it never changes etcd.
author:
  - cloudstack.cks contributors (@cloudstack-cks)
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
  endpoints:
    description:
      - etcd client URLs to ask for the member list, tried in turn until one answers, for example
        V(https://127.0.0.1:2379) on a control node of a cluster with stacked etcd or V(http://10.1.1.5:2379)
        for an external etcd node.
      - The members are then probed on the client URLs the member list advertises, with the same TLS settings.
    type: list
    elements: str
    required: true
  going_down:
    description:
      - Names of the etcd members about to go down. An etcd member is named after its node, the VM name
        in lowercase (kubeadm names stacked members after the node; CKS external etcd nodes likewise).
      - A name that is not a member is an error, so a typo cannot turn the question into a plain health check.
      - Empty asks whether etcd has a healthy quorum now.
    type: list
    elements: str
    default: []
  ca_cert:
    description:
      - Path of the CA bundle that signed the etcd server certificates, for V(https://) endpoints.
      - For kubeadm (stacked etcd) V(/etc/kubernetes/pki/etcd/ca.crt). Without it the system CAs are used.
    type: path
  client_cert:
    description:
      - Path of the client certificate etcd asks for (C(--client-cert-auth)).
      - For kubeadm V(/etc/kubernetes/pki/etcd/healthcheck-client.crt). Requires O(client_key).
    type: path
  client_key:
    description:
      - Path of the private key of O(client_cert).
      - For kubeadm V(/etc/kubernetes/pki/etcd/healthcheck-client.key). It is read, never returned.
    type: path
  validate_certs:
    description:
      - If V(false), the etcd server certificates are not verified. A CA in O(ca_cert) is the better fix.
    type: bool
    default: true
  timeout:
    description:
      - Seconds to wait for each answer of etcd (member list, one health probe, the read). Members are
        probed at the same time, so the whole check takes about one timeout when some member does not answer.
    type: float
    default: 5
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
  - 'Where to run it on a real cloud: etcd listens only on the cluster network, so run the module on a
    control node, delegated over SSH. CKS nodes accept SSH as user V(cloud) with the cluster''s SSH keypair,
    through the port-forwarding rule of the node on the cluster network''s public IP (C(listPortForwardingRules)
    with V(privateport=22) gives the public port of each node). There, use O(endpoints=https://127.0.0.1:2379)
    with O(ca_cert=/etc/kubernetes/pki/etcd/ca.crt), O(client_cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt)
    and O(client_key=/etc/kubernetes/pki/etcd/healthcheck-client.key) (readable by root, so use C(become)).'
  - For a cluster with external etcd nodes, the members serve plain HTTP on V(http://<node IP>:2379); run the
    module on any node of the cluster network (a control node, delegated as above) and leave the TLS options out.
  - When the endpoints are reachable from the Ansible controller (a VPN, a jump host's tunnel, a test
    environment), run it on the controller with V(delegate_to=localhost) instead.
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
- name: Would etcd keep quorum while this control node restarts? (on another control node)
  cloudstack.cks.cks_etcd_quorum:
    endpoints: [https://127.0.0.1:2379]
    ca_cert: /etc/kubernetes/pki/etcd/ca.crt
    client_cert: /etc/kubernetes/pki/etcd/healthcheck-client.crt
    client_key: /etc/kubernetes/pki/etcd/healthcheck-client.key
    going_down: ["{{ node_name | lower }}"]
  delegate_to: "{{ other_control_node }}"
  become: true

- name: Is the external etcd healthy? Report, do not fail
  cloudstack.cks.cks_etcd_quorum:
    endpoints:
      - http://10.1.1.21:2379
      - http://10.1.1.22:2379
      - http://10.1.1.23:2379
    fail_when_unsafe: false
  register: etcd

- name: Show the answer
  ansible.builtin.debug:
    msg: "{{ etcd.msg }} (tolerates {{ etcd.tolerates }} more)"
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
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.etcd import EtcdClient
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import EtcdError
from ansible_collections.cloudstack.cks.plugins.module_utils.ansible_module import run


def argument_spec() -> dict[str, dict[str, Any]]:
    return {
        "endpoints": {"type": "list", "elements": "str", "required": True},
        "going_down": {"type": "list", "elements": "str", "default": []},
        "ca_cert": {"type": "path"},
        "client_cert": {"type": "path"},
        "client_key": {"type": "path", "no_log": False},
        "validate_certs": {"type": "bool", "default": True},
        "timeout": {"type": "float", "default": 5.0},
        "require_ready": {"type": "bool", "default": True},
        "fail_when_unsafe": {"type": "bool", "default": True},
    }


def check_quorum(params: dict[str, Any]) -> dict[str, Any]:
    client = EtcdClient(
        params["endpoints"], ca_cert=params["ca_cert"], client_cert=params["client_cert"],
        client_key=params["client_key"], validate_certs=params["validate_certs"], timeout=params["timeout"],
    )
    verdict = client.check(params["going_down"], require_ready=params["require_ready"])
    result = verdict.to_dict()
    if not verdict.safe and params["fail_when_unsafe"]:
        # Fail with every return value but msg, so a rescue or a report sees the members too.
        raise EtcdError(verdict.message, **{key: value for key, value in result.items() if key != "msg"})
    return dict(result, changed=False)


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_together=[("client_cert", "client_key")],
        supports_check_mode=True,
    )
    run(module, lambda: check_quorum(module.params))


if __name__ == "__main__":
    main()
