"""A TLS handshake cut off by a load balancer with nothing behind it is a dropped connection: the
clients send again (over the real ``kubernetes`` client, against cks-sim's API endpoint behind a
TCP forwarder that closes the first connections as soon as it accepts them). A certificate that does
not verify stays final (test_clients_kube's wrong CA)."""

from __future__ import annotations

import socket
import threading
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest
import yaml
from helpers import running_sim

from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube import KubeClient
from ansible_collections.cloudstack.cks.plugins.module_utils._clients.kube_options import KubeOptions


class CuttingForwarder:
    """Listens on loopback; closes the first ``cut`` connections at accept (as haproxy does with no
    server up), forwards the rest to ``target`` byte for byte (TLS passes through)."""

    def __init__(self, target: tuple[str, int], cut: int) -> None:
        self.target = target
        self.cut = cut
        self.accepted = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _addr = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            if self.accepted <= self.cut:
                conn.close()
                continue
            upstream = socket.create_connection(self.target)
            for src, dst in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for end in (src, dst):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        self.listener.close()


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with running_sim("small.yml") as handle:
        yield handle


def _kubeconfig_through(sim: Any, forwarder: CuttingForwarder) -> dict[str, Any]:
    with open(sim.env["kubeconfig"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    cluster = config["clusters"][0]["cluster"]
    cluster["server"] = f"https://127.0.0.1:{forwarder.port}"
    return config


def _target(sim: Any) -> tuple[str, int]:
    with open(sim.env["kubeconfig"], encoding="utf-8") as fh:
        server = urlsplit(yaml.safe_load(fh)["clusters"][0]["cluster"]["server"])
    return server.hostname or "127.0.0.1", int(server.port or 443)


def test_a_read_whose_handshake_is_cut_is_sent_again(sim: Any) -> None:
    forwarder = CuttingForwarder(_target(sim), cut=2)
    try:
        with KubeClient.connect(KubeOptions(kubeconfig=_kubeconfig_through(sim, forwarder))) as kube:
            names = [n["metadata"]["name"] for n in kube.list_nodes()]
            retries = kube.retry_log.snapshot()
    finally:
        forwarder.close()
    assert len(names) == 7  # small.yml: 3 control nodes and 4 workers, read through the forwarder
    assert forwarder.accepted == 3 and retries["retries"] == 2, retries
    causes = [r["cause"] for r in retries["recent"]]
    assert all("TLS handshake" in c and "cut off" in c for c in causes), causes
    assert not any("TLS verification" in c for c in causes)


def test_a_write_whose_handshake_is_cut_is_sent_again_as_it_is(sim: Any) -> None:
    # Nothing reached the API server: the write goes again without a read to settle it.
    forwarder = CuttingForwarder(_target(sim), cut=0)
    try:
        with KubeClient.connect(KubeOptions(kubeconfig=_kubeconfig_through(sim, forwarder))) as kube:
            node = sorted(n["metadata"]["name"] for n in kube.list_nodes())[-1]
            forwarder.cut = forwarder.accepted + 1  # the next connection is cut
            kube.patch_node(node, {"metadata": {"labels": {"handshake-cut-test": "yes"}}})
            labelled = kube.read_node(node)["metadata"]["labels"].get("handshake-cut-test")
            kube.patch_node(node, {"metadata": {"labels": {"handshake-cut-test": None}}})
            retries = kube.retry_log.snapshot()
    finally:
        forwarder.close()
    assert labelled == "yes"
    assert retries["retries"] >= 1 and not retries["lost_answers_settled"], retries
