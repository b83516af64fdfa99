# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
name: clusters
short_description: The CKS clusters a CloudStack key can see, as inventory hosts
version_added: 0.2.0
description:
  - Lists the CloudStack Kubernetes Service (CKS) clusters the API key can see, one host per cluster, with the
    cluster's id, state, Kubernetes version, zone, owner, node counts and offerings per node type as host
    variables, all in the group C(cks_clusters).
  - The clusters are listed as CloudStack scopes them for the key (C(listKubernetesClusters) with C(listall=true)) -
    a root admin sees every account's, a domain admin those of its domain and the domains below, a user only its
    own account's - and once more with C(projectid=-1) for the projects' clusters the key may see. Both are paged
    (500 a page), so 200 clusters cost 2 calls.
  - A host is named after its cluster. CloudStack keeps a name unique only within an account or project, so when
    a key sees two clusters of the same name, each of them is named V(<name>@<project or account>) (and
    V(<name>@<id>) if that clashes too), with a warning; no cluster is dropped.
  - With O(out_of_date=true), each cluster is also read as M(cloudstack.cks.cks_node_outdated) reads it, which
    costs, per cluster, its kubeconfig (C(getKubernetesClusterConfig)), 5 more CloudStack list calls and 3
    Kubernetes reads; see RV(cks_out_of_date).
  - The configuration file must end in V(.cks.yml), V(.cks.yaml), V(cks_clusters.yml) or V(cks_clusters.yaml) and
    hold the line C(plugin) set to V(cloudstack.cks.clusters).
  - No secret is put into the inventory, its cache or its warnings - not the API secret, not a kubeconfig.
author:
  - cloudstack.cks contributors (@cloudstack-cks)
requirements:
  - cs >= 5.0
  - kubernetes >= 35.0.0 (only for O(out_of_date))
extends_documentation_fragment:
  - ansible.builtin.constructed
  - ansible.builtin.inventory_cache
options:
  plugin:
    description: The name of this plugin; it marks the file as this plugin's configuration.
    required: true
    type: str
    choices: [cloudstack.cks.clusters]
  api_url:
    description:
      - URL of the CloudStack API, for example V(https://cloud.example.com/client/api).
      - Without O(api_url) or O(api_key), the settings are read from the C(cs) library's configuration
        (C(cloudstack.ini)), as the modules do.
    type: str
    env:
      - name: CLOUDSTACK_ENDPOINT
  api_key:
    description: API key of the CloudStack user whose clusters are listed.
    type: str
    env:
      - name: CLOUDSTACK_KEY
  api_secret:
    description:
      - Secret key of the CloudStack user. It signs every request and is never sent or shown.
      - Keep it out of the file - in the environment, or in an AWX credential that sets E(CLOUDSTACK_SECRET).
    type: str
    env:
      - name: CLOUDSTACK_SECRET
  api_http_method:
    description: HTTP method used to call the API.
    type: str
    choices: [get, post]
    env:
      - name: CLOUDSTACK_METHOD
  api_timeout:
    description: Timeout of one HTTP request to CloudStack, in seconds. Defaults to V(10).
    type: int
    env:
      - name: CLOUDSTACK_TIMEOUT
  api_verify_ssl_cert:
    description: Path of a CA bundle to verify the API's TLS certificate with, instead of the system CAs.
    type: str
    env:
      - name: CLOUDSTACK_VERIFY
  validate_certs:
    description:
      - If V(false), the API's TLS certificate is not verified. Only for test endpoints.
      - If not given, E(CLOUDSTACK_DANGEROUS_NO_TLS_VERIFY) is read as its name says (V(true) means do B(not)
        verify), as the collection's modules read it. Defaults to V(true).
    type: bool
  out_of_date:
    description:
      - Also read, for every cluster in state C(Running) or C(Alert), how many nodes of each type differ from
        the settings the cluster has stored, and who holds its rollout lock (RV(cks_out_of_date),
        RV(cks_lock_holder)). Clusters in other states get RV(cks_out_of_date_skipped) instead.
      - Each cluster costs its kubeconfig, fetched with C(getKubernetesClusterConfig) (admin credentials of that
        cluster; used in memory and never written into the inventory), 5 more CloudStack list calls and 3
        Kubernetes reads, one cluster after the other - about 0.1 to 0.5 s a cluster. Use the inventory cache
        when this runs often.
      - A cluster that cannot be read gets a warning and RV(cks_out_of_date_skipped); the others are listed.
    type: bool
    default: false
  nodes:
    description:
      - Also add each cluster's nodes as hosts, named as their Kubernetes nodes, in the groups C(cks_nodes) and
        C(cks_control_nodes), C(cks_worker_nodes) or C(cks_etcd_nodes), with the SSH port forward CKS created on
        the cluster's public IP as C(ansible_host) and C(ansible_port) (else the private IP and port 22).
      - Costs 2 more paged CloudStack calls (C(listPortForwardingRules)), whatever the number of clusters.
      - O(compose), O(groups), O(keyed_groups) and O(filters) apply to the cluster hosts; a node is listed when
        its cluster is.
    type: bool
    default: false
  filters:
    description:
      - Jinja2 conditions on a cluster's host variables; a cluster is listed only when every one is true,
        for example V(cks_zone == 'zone-east').
      - One that cannot be evaluated fails the inventory with O(strict=true), else it is ignored with a warning.
    type: list
    elements: str
    default: []
  kube_request_timeout:
    description: Timeout of one Kubernetes API request, in seconds (only with O(out_of_date)).
    type: float
    default: 20.0
notes:
  - The Kubernetes API's TLS certificate is verified with the CA of the cluster's own kubeconfig.
  - The host variable C(rollout_cluster) is the cluster's id (and C(rollout_project_id) its project's), so a play
    over the group can run the collection's roles and modules for each cluster without further lookups.
seealso:
  - module: cloudstack.cks.cks_node_outdated
"""

EXAMPLES = r"""
# fleet.cks.yml - every cluster the key can see, grouped by zone and by account
plugin: cloudstack.cks.clusters
keyed_groups:
  - key: cks_zone
    prefix: zone
  - key: cks_account
    prefix: account
groups:
  needs_rollout: (cks_out_of_date_total | default(0)) > 0
out_of_date: true

# A second file, east.cks.yml - only the running clusters of one zone, with their nodes, cached for an hour
# plugin: cloudstack.cks.clusters
# filters:
#   - cks_zone == 'zone-east'
#   - cks_state == 'Running'
# nodes: true
# compose:
#   ansible_connection: "'local'"
# cache: true
# cache_plugin: ansible.builtin.jsonfile
# cache_connection: /var/cache/ansible/cks
# cache_timeout: 3600
"""

RETURN = r"""
cks_id:
  description: The cluster's id.
  type: str
cks_name:
  description: The cluster's name (the host name, unless two visible clusters share it).
  type: str
cks_state:
  description: The cluster's CKS state, for example V(Running), V(Alert), V(Stopped).
  type: str
cks_kubernetes_version:
  description: The name of the cluster's Kubernetes version (C(kubernetesversionname)).
  type: str
cks_zone:
  description: The name of the cluster's zone (C(cks_zone_id) its id).
  type: str
cks_account:
  description: The account that owns the cluster (for a project's cluster, the project's account).
  type: str
cks_domain:
  description: The domain of the owner (C(cks_domain_id), C(cks_domain_path)).
  type: str
cks_project:
  description: The project that owns the cluster, if any (C(cks_project_id) its id).
  type: str
cks_node_counts:
  description: Nodes per type (C(control), C(worker), C(etcd)), counted from the cluster's VMs.
  type: dict
cks_offerings:
  description:
    - The service offering CKS recorded per node type (C(null) for a type without nodes); before CloudStack 4.21
      the cluster's default offering for every type.
    - CloudStack's record goes stale once anyone but CKS changes a VM; RV(cks_out_of_date) judges the VMs.
  type: dict
cks_out_of_date:
  description:
    - With O(out_of_date) - per node type, how many nodes differ from the settings the cluster has stored (as
      M(cloudstack.cks.cks_node_outdated) judges them; before any settings are stored, from the cluster's own).
      C(null) when the cluster was not read (see C(cks_out_of_date_skipped)); C(cks_out_of_date_total) their sum.
  type: dict
cks_lock_holder:
  description: With O(out_of_date) - who holds the cluster's rollout lock now, C(null) when nobody does.
  type: str
cks_out_of_date_skipped:
  description: With O(out_of_date) - why the cluster's nodes were not read (its state, or the error), else C(null).
  type: str
rollout_cluster:
  description: The cluster's id, as the collection's playbooks take it.
  type: str
cks_node_type:
  description: On a node host (O(nodes)) - C(control), C(worker) or C(etcd); also C(cks_cluster) (its cluster's host
    name), C(cks_cluster_id), C(cks_vm_id), C(cks_vm_state), C(cks_private_ip), C(cks_ssh_public_ip) and
    C(cks_ssh_public_port).
  type: str
"""

import hashlib
from typing import Any, Optional

from ansible.errors import AnsibleError, AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable
from ansible.utils.display import Display

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack import HAS_CS, CloudStackClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.cloudstack_options import CloudStackOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import HAS_KUBERNETES, KubeClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_options import KubeOptions
from ansible_collections.cloudstack.cks.plugins.module_utils._common.errors import CksError
from ansible_collections.cloudstack.cks.plugins.module_utils._decisions.inventory import InventoryHost
from ansible_collections.cloudstack.cks.plugins.module_utils._services.inventory import Inventory, InventoryOptions, list_inventory
from ansible_collections.cloudstack.cks.plugins.module_utils.ansible_module import validate_certs_from_environment

display = Display()

CONFIG_ENDINGS = (".cks.yml", ".cks.yaml", "cks_clusters.yml", "cks_clusters.yaml")
CONNECTION_OPTIONS = ("api_url", "api_key", "api_secret", "api_http_method", "api_timeout", "api_verify_ssl_cert",
                      "validate_certs")


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    NAME = "cloudstack.cks.clusters"

    def verify_file(self, path: str) -> bool:
        return super().verify_file(path) and path.endswith(CONFIG_ENDINGS)

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        options = self._cloudstack_options()
        # Two keys may share one file (two AWX sources): each key has its own cache entry. The key is
        # hashed so that the cache file names carry no credential.
        cache_key = self.get_cache_key(path) + "_" + hashlib.sha256(
            f"{options.api_url}|{options.api_key}".encode()).hexdigest()[:16]
        use_cache = bool(self.get_option("cache"))
        listed: Optional[Inventory] = None
        if use_cache and cache:
            try:
                listed = Inventory.from_dict(self._cache[cache_key])
            except KeyError:
                listed = None
        if listed is None:
            listed = self._list(options)
            if use_cache:
                self._cache[cache_key] = listed.to_dict()
        for warning in listed.warnings:
            display.warning(warning)
        self._populate(listed)

    def _cloudstack_options(self) -> CloudStackOptions:
        if not HAS_CS:
            raise AnsibleError("the cs Python library is required by the cloudstack.cks.clusters inventory: "
                               "pip install -r requirements.txt of the collection")
        params = {name: self.get_option(name) for name in CONNECTION_OPTIONS}
        if params["validate_certs"] is None:
            params["validate_certs"] = validate_certs_from_environment()
        try:
            return CloudStackOptions.from_params(params)
        except CksError as exc:
            raise AnsibleParserError(f"cloudstack.cks.clusters: {exc.msg}")

    def _list(self, options: CloudStackOptions) -> Inventory:
        out_of_date = bool(self.get_option("out_of_date"))
        if out_of_date and not HAS_KUBERNETES:
            raise AnsibleError("out_of_date: true needs the kubernetes Python library: pip install -r "
                               "requirements.txt of the collection, or set out_of_date: false")
        kube_options = KubeOptions(request_timeout=float(self.get_option("kube_request_timeout")))
        cloud = CloudStackClient(options)

        def connect_kube(cluster_id: Optional[str]) -> KubeClient:
            return KubeClient.connect(kube_options, cloudstack=cloud, cluster_id=cluster_id)

        try:
            return list_inventory(cloud, InventoryOptions(out_of_date=out_of_date, nodes=bool(self.get_option("nodes"))),
                                  connect_kube)
        except CksError as exc:
            raise AnsibleParserError(f"cloudstack.cks.clusters: {exc.msg}")

    def _passes_filters(self, host: InventoryHost, strict: bool) -> bool:
        # As community.general's proxmox inventory judges its ``filters``: every one must hold.
        for condition in self.get_option("filters") or []:
            try:
                if not self._compose(condition, host.hostvars):
                    return False
            except Exception as exc:  # pylint: disable=broad-except  # any templating error, as constructed does
                message = f"could not evaluate filter {condition!r} for {host.name}: {exc}"
                if strict:
                    raise AnsibleError(message)
                display.warning(message)
        return True

    def _populate(self, listed: Inventory) -> None:
        strict = bool(self.get_option("strict"))
        shown: set[str] = set()
        for host in listed.hosts:
            if host.cluster is None:
                if not self._passes_filters(host, strict):
                    continue
                shown.add(host.name)
            elif host.cluster not in shown:
                continue
            for group in host.groups:
                self.inventory.add_group(group)
            self.inventory.add_host(host.name, group=host.groups[0] if host.groups else None)
            for group in host.groups[1:]:
                self.inventory.add_child(group, host.name)
            for key, value in host.hostvars.items():
                self.inventory.set_variable(host.name, key, value)
            if host.cluster is None:
                self._set_composite_vars(self.get_option("compose"), host.hostvars, host.name, strict=strict)
                self._add_host_to_composed_groups(self.get_option("groups"), host.hostvars, host.name, strict=strict)
                self._add_host_to_keyed_groups(self.get_option("keyed_groups"), host.hostvars, host.name, strict=strict)
