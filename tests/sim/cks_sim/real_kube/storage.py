"""Where the real control plane's API servers store, and where they run: the CKS cluster's own etcd
members and control nodes, as kubeadm lays them out.

- stacked etcd (a member on each control node, TLS): each control node's kube-apiserver names its
  own node's member only (kubeadm's ``--etcd-servers=https://127.0.0.1:2379``), with a client
  certificate issued by the cluster's etcd CA (kubeadm's ``apiserver-etcd-client``), so it answers
  while that member is in a quorum and stops answering with it;
- external etcd (CKS's etcd nodes, plain HTTP): every API server names every member (CKS's
  ``k8s-control-node.yml`` writes ``http://<etcd node>:2379`` for each);
- no etcd members (``cks-sim serve --no-etcd``): the plane's own etcd, shared by its API servers.

kube-apiserver v1.35 stores in Debian's etcd 3.4.23, the members cks-sim runs (it speaks only etcd's
v3 API, which 3.4 serves; tests/real/test_real_examples.py reads its objects back from the members).
"""

from __future__ import annotations

from typing import Any, Optional

from ..tls import issue_cert

#: kubeadm's name for the API server's etcd client certificate (its CN, and the file's stem).
ETCD_CLIENT = "kube-apiserver-etcd-client"


def plane_layout(etcd: Any, control_nodes: list[tuple[str, bool]], external_servers: list[str],
                 endpoint: str, pki_dir: str) -> dict[str, Any]:
    """``ControlPlane``'s keyword arguments for a cluster: ``control_nodes`` (each node's etcd client
    URLs), ``stopped``, ``etcd_tls`` and ``endpoint``.

    ``etcd``: the sim's ``EtcdManager`` (None without members); ``control_nodes``: (node name, its VM
    runs) in the cluster's order; ``external_servers``: the external members' client URLs (empty when
    stacked); ``endpoint``: the spec's ``api_endpoint``.
    """
    names = [name for name, _running in control_nodes]
    layout: dict[str, Any] = {
        "stopped": frozenset(name for name, running in control_nodes if not running),
        "endpoint": endpoint,
        "etcd_tls": None,
    }
    members = {name: etcd.member_files(name) for name in names} if etcd is not None and not external_servers else {}
    stacked = {name: files for name, files in members.items() if files is not None and files["mode"] == "stacked"}
    if stacked:
        files = next(iter(stacked.values()))["files"]
        ca = {"ca_cert": files["ca.crt"], "ca_key": files["ca.key"]}
        cert, key = issue_cert(ca, ETCD_CLIENT, [], client=True, server=False, out_dir=pki_dir)
        layout["etcd_tls"] = (files["ca.crt"], cert, key)
    every = [files["client_url"] for files in stacked.values()]
    servers: dict[str, Optional[list[str]]] = {}
    for name in names:
        if external_servers:
            servers[name] = list(external_servers)
        elif name in stacked:
            servers[name] = [stacked[name]["client_url"]]
        else:
            # A control node without a member of its own (none here today): the members there are.
            servers[name] = every or None
    layout["control_nodes"] = servers
    return layout
