"""The control plane's static pods as kubeadm writes them: the mirror pods of etcd, kube-apiserver,
kube-controller-manager and kube-scheduler, the etcd URLs they carry, and an API server that stops
``StaticPods`` is the kubelet's side of them on every control node, written against the small
``kube_cluster_api.ClusterApi``; it is handed the nodes' hidden state, the cluster's version and
etcd topology, and the scheduler's ``place(pod, node)`` (the in-memory API's binding; on a real API
server nothing: the mirror pod is created bound).
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Optional

from .kube_cluster_api import ClusterApi
from .kube_helpers import now_micro
from .kube_hidden import NodeState, Workload
from .kube_resources import MIRROR_ANNOTATION
from .kube_templates import pod_spec

KUBEADM_REQUESTS: dict[str, dict[str, str]] = {
    "etcd": {"cpu": "100m", "memory": "100Mi"}, "kube-apiserver": {"cpu": "250m"},
    "kube-controller-manager": {"cpu": "200m"}, "kube-scheduler": {"cpu": "100m"},
}


class StaticPods:
    """kubeadm's static pods on control nodes."""

    def __init__(self, api: ClusterApi, nodes: dict[str, NodeState], version: str, stacked_etcd: bool, *,
                 place: Callable[[dict[str, Any], Optional[str]], None]) -> None:
        self.api = api
        self.nodes = nodes
        self.version = version
        self.stacked_etcd = stacked_etcd
        self.place = place
        self.etcd_servers = "https://127.0.0.1:2379"  # kubeadm's for stacked etcd

    def ensure_mirror_pods(self, node: str) -> None:
        components = ["kube-apiserver", "kube-controller-manager", "kube-scheduler"]
        if self.stacked_etcd:
            components.insert(0, "etcd")
        state = self.nodes[node]
        node_uid = (self.api.read("nodes", "", node) or {"metadata": {}})["metadata"].get("uid", "")
        for comp in components:
            name = f"{comp}-{node}"
            if self.api.read("pods", "kube-system", name) is not None:
                continue
            config_hash = hashlib.md5(f"{comp}/{node}".encode()).hexdigest()
            annotations = {
                "kubernetes.io/config.hash": config_hash, MIRROR_ANNOTATION: config_hash,
                "kubernetes.io/config.seen": now_micro(), "kubernetes.io/config.source": "file",
            }
            if comp == "etcd":
                annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"] = f"https://{state.ip}:2379"
            if comp == "kube-apiserver":
                annotations["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"] = f"{state.ip}:6443"
            wl = Workload(kind="Mirror", namespace="kube-system", name=comp, replicas=1,
                          labels={"component": comp, "tier": "control-plane"}, empty_dir=False, uid="",
                          extra={"image": f"registry.k8s.io/{comp}:v{self.version}" if comp != "etcd"
                                 else "registry.k8s.io/etcd:3.5.15-0"})
            spec = pod_spec(wl, self.version)
            if comp == "etcd":
                self._kubeadm_etcd_container(spec, node, f"https://{state.ip}:2379")
            if comp == "kube-apiserver":
                # kubeadm's manifest (cmd/kubeadm/app/phases/controlplane/manifests.go,
                # getAPIServerCommand): the flags that say where etcd is.
                spec["containers"][0]["command"] = [
                    "kube-apiserver", f"--advertise-address={state.ip}",
                    f"--etcd-servers={self.etcd_servers}", "--secure-port=6443"]
                if self.stacked_etcd:
                    spec["containers"][0]["command"][3:3] = [
                        "--etcd-cafile=/etc/kubernetes/pki/etcd/ca.crt",
                        "--etcd-certfile=/etc/kubernetes/pki/apiserver-etcd-client.crt",
                        "--etcd-keyfile=/etc/kubernetes/pki/apiserver-etcd-client.key"]
            # A static pod has no service account: the API server refuses a mirror pod that names
            # one (ServiceAccount admission, "a mirror pod may not reference service accounts").
            spec.pop("serviceAccount", None)
            spec.pop("serviceAccountName", None)
            # kubeadm's requests (manifests.go ComponentResources; etcd's in local.go): what makes the
            # API server derive qosClass Burstable, which it then keeps immutable.
            spec["containers"][0]["resources"] = {"requests": KUBEADM_REQUESTS[comp]}
            # A mirror pod is created bound to its node (the kubelet's), never scheduled.
            spec.update({"nodeName": node, "hostNetwork": True, "priority": 2000001000,
                         "priorityClassName": "system-node-critical",
                         "tolerations": [{"operator": "Exists", "effect": "NoExecute"}]})
            pod = {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": self.api.new_meta(name, "kube-system", labels=dict(wl.labels), annotations=annotations,
                                              ownerReferences=[{"apiVersion": "v1", "kind": "Node", "name": node,
                                                                "uid": node_uid, "controller": True}]),
                "spec": spec,
                "status": {"phase": "Pending", "qosClass": "Burstable"},
            }
            self.api.put("pods", pod)
            self.place(pod, node)

    def _kubeadm_etcd_container(self, spec: dict[str, Any], node: str, client_url: str) -> None:
        """kubeadm's etcd manifest (cmd/kubeadm/app/phases/etcd/local.go, GetEtcdPodSpec): the
        flags that name the certificates under /etc/kubernetes/pki/etcd, and the two hostPaths."""
        ip = client_url.split("//", 1)[-1].rsplit(":", 1)[0]
        pki = "/etc/kubernetes/pki/etcd"
        container = spec["containers"][0]
        container["command"] = [
            "etcd", f"--advertise-client-urls={client_url}", f"--cert-file={pki}/server.crt",
            "--client-cert-auth=true", "--data-dir=/var/lib/etcd", "--experimental-initial-corrupt-check=true",
            "--experimental-watch-progress-notify-interval=5s", f"--initial-advertise-peer-urls=https://{ip}:2380",
            f"--initial-cluster={node}=https://{ip}:2380", f"--key-file={pki}/server.key",
            f"--listen-client-urls=https://127.0.0.1:2379,{client_url}", "--listen-metrics-urls=http://127.0.0.1:2381",
            f"--listen-peer-urls=https://{ip}:2380", f"--name={node}", f"--peer-cert-file={pki}/peer.crt",
            "--peer-client-cert-auth=true", f"--peer-key-file={pki}/peer.key", f"--peer-trusted-ca-file={pki}/ca.crt",
            "--snapshot-count=10000", f"--trusted-ca-file={pki}/ca.crt",
        ]
        container["volumeMounts"] = [{"mountPath": "/var/lib/etcd", "name": "etcd-data"},
                                     {"mountPath": pki, "name": "etcd-certs"}]
        spec["volumes"] = [{"hostPath": {"path": pki, "type": "DirectoryOrCreate"}, "name": "etcd-certs"},
                           {"hostPath": {"path": "/var/lib/etcd", "type": "DirectoryOrCreate"}, "name": "etcd-data"}]

    def use_external_etcd_servers(self, urls: list[str]) -> None:
        """kubeadm's --etcd-servers for external etcd (CKS's k8s-control-node.yml writes
        http://<etcd node ip>:2379 for each): here the members' real client URLs, which are also
        what they advertise, as on a real cluster."""
        self.etcd_servers = ",".join(urls)
        for pod in self.api.select("pods", "kube-system"):
            if (pod["metadata"].get("labels") or {}).get("component") != "kube-apiserver":
                continue
            command = pod["spec"]["containers"][0].setdefault("command", [])
            for i, arg in enumerate(command):
                if arg.startswith("--etcd-servers="):
                    command[i] = f"--etcd-servers={self.etcd_servers}"
            self.api.put("pods", pod)

    def use_etcd_client_urls(self, urls: dict[str, str]) -> None:
        """Show each stacked member's real client URL (the sim's loopback port) where kubeadm
        shows its node's: the pod annotation and --advertise-client-urls, so that they match
        what `etcdctl member list` answers, as they do on a cluster."""
        for node, url in urls.items():
            pod = self.api.read("pods", "kube-system", f"etcd-{node}")
            if pod is None:
                continue
            pod["metadata"]["annotations"]["kubeadm.kubernetes.io/etcd.advertise-client-urls"] = url
            command = pod["spec"]["containers"][0].get("command") or []
            for i, arg in enumerate(command):
                if arg.startswith("--advertise-client-urls="):
                    command[i] = f"--advertise-client-urls={url}"
                elif arg.startswith("--listen-client-urls="):
                    command[i] = f"--listen-client-urls=https://127.0.0.1:2379,{url}"
            self.api.put("pods", pod)
