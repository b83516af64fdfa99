"""External etcd members advertise their node's guest IP, as CKS sets them up.

Follows ``KubernetesClusterStartWorker.getInitialEtcdClusterDetails`` (apache/cloudstack,
plugins/integrations/kubernetes-service): ``--initial-cluster`` is ``<hostname>=http://<guest IP>:2380``
for each etcd node, and ``getEtcdEndpointList`` gives the control nodes ``http://<guest IP>:2379``.
The sim listens on a VM's address when its cluster's network is a loopback /24 (``guest_cidr``);
``nodes[].etcd_member_name`` starts a member under another ``--name``, as one replaced by hand.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import requests
from cks_sim.spec import SpecError, normalize
from simkit import small_spec


def test_members_on_a_loopback_network_listen_on_their_vms_address(sim_factory):
    raw = small_spec()
    raw["clusters"][0].update(name="peers", etcd_nodes=3, control_nodes=1, workers=1, guest_cidr="127.0.9.0/24",
                              nodes=[{"type": "etcd", "index": 1, "etcd_member_name": "replaced-by-hand"}])
    handle = sim_factory(spec=raw, etcd=True)
    ips = {vm["name"]: vm["nic"][0]["ipaddress"] for vm in handle.node_vms("etcd")}
    assert all(ip.startswith("127.0.9.") for ip in ips.values()), ips

    # The real etcd's member list: what a client reads.
    client_url = handle.env["etcd"]["members"][0]["client_url"]
    listed = requests.post(f"{client_url}/v3/cluster/member/list", json={}, timeout=10).json()["members"]
    by_host = {urlsplit(m["peerURLs"][0]).hostname: m["name"] for m in listed}
    assert set(by_host) == set(ips.values())
    assert sorted(by_host.values()) == sorted([*[n for n in ips if n in by_host.values()], "replaced-by-hand"])
    renamed = [vm for vm, ip in ips.items() if by_host[ip] == "replaced-by-hand"]
    assert len(renamed) == 1 and renamed[0] not in by_host.values()
    for member in listed:
        assert urlsplit(member["clientURLs"][0]).hostname == urlsplit(member["peerURLs"][0]).hostname


def test_members_elsewhere_keep_listening_on_127_0_0_1(sim_factory):
    raw = small_spec()
    raw["clusters"][0].update(name="plain", etcd_nodes=1, control_nodes=1, workers=1)
    handle = sim_factory(spec=raw, etcd=True)
    (member,) = handle.env["etcd"]["members"]
    assert urlsplit(member["peer_url"]).hostname == "127.0.0.1"
    assert handle.node_vms("etcd")[0]["nic"][0]["ipaddress"].startswith("10.1.0.")


@pytest.mark.parametrize("change, field", [
    ({"guest_cidr": "127.0.0.0/16"}, "guest_cidr: '127.0.0.0/16' must be an IPv4 /24"),
    ({"guest_cidr": "nonsense"}, "guest_cidr: 'nonsense' is not an IPv4 network"),
    ({"nodes": [{"type": "worker", "index": 0, "etcd_member_name": "x"}]}, "only an external etcd node's member"),
])
def test_bad_peer_settings_name_the_field(change, field):
    raw = small_spec()
    raw["clusters"][0].update(etcd_nodes=1, **change)
    with pytest.raises(SpecError) as caught:
        normalize(raw)
    assert field in str(caught.value)
