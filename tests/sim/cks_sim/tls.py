"""The sim's own PKI: one CA, the API server's certificate, the admin client certificate.

A real CKS cluster hands out a kubeadm admin.conf whose CA and client certificate come from the
cluster's own CA; the sim does the same, so clients run with TLS verification on, exactly as
against a cloud. The etcd manager issues its member and client certificates from the same CA
with ``issue_cert``.

Files are reused when they already exist in the state directory (a restarted sim keeps the CA
its kubeconfigs were written with). Private keys and certificates are written 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from typing import TYPE_CHECKING, Any, Union, cast

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPublicKeyTypes

_VALIDITY = datetime.timedelta(days=3650)
_BACKDATE = datetime.timedelta(hours=1)  # tolerate small clock skew between processes


def _write_private(path: str, data: bytes) -> None:
    # Create with 0600 from the start so the key is never readable by others, not even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(path, 0o600)


def _new_key() -> ec.EllipticCurvePrivateKey:
    # P-256 keys: fast to generate, accepted by Python's ssl, urllib3 and etcd 3.4.
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = []
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _san_entries(sans: list[str]) -> list[Union[x509.IPAddress, x509.DNSName]]:
    entries: list[Union[x509.IPAddress, x509.DNSName]] = []
    for san in sans:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(san)))
        except ValueError:
            entries.append(x509.DNSName(san))
    return entries


def _load_ca(tls: dict[str, str]) -> tuple[x509.Certificate, Any]:
    with open(tls["ca_cert"], "rb") as handle:
        ca_cert = x509.load_pem_x509_certificate(handle.read())
    with open(tls["ca_key"], "rb") as handle:
        ca_key = serialization.load_pem_private_key(handle.read(), password=None)
    return ca_cert, ca_key


def _make_ca(cert_path: str, key_path: str) -> None:
    key = _new_key()
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = _name("cks-sim-ca")
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_private(key_path, _key_pem(key))
    _write_private(cert_path, cert.public_bytes(serialization.Encoding.PEM))


def issue_cert(
    tls: dict[str, str],
    name: str,
    sans: list[str],
    client: bool,
    server: bool,
    out_dir: str,
    organization: str | None = None,
) -> tuple[str, str]:
    """Issue ``<out_dir>/<name>.crt`` and ``.key`` signed by the sim CA; reuse them if present.

    ``name`` is the certificate's common name (and file stem); ``sans`` are IPs or DNS names.
    """
    os.makedirs(out_dir, mode=0o700, exist_ok=True)
    cert_path = os.path.join(out_dir, f"{name}.crt")
    key_path = os.path.join(out_dir, f"{name}.key")
    if os.path.exists(cert_path) and os.path.exists(key_path):
        return cert_path, key_path
    ca_cert, ca_key = _load_ca(tls)
    key = _new_key()
    now = datetime.datetime.now(datetime.timezone.utc)
    usages = []
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(name, organization))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=True,
                data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            # A certificate's key may be one only for key agreement (X25519, X448); the CA's, which
            # signs, is not (_make_ca's P-256 key).
            x509.AuthorityKeyIdentifier.from_issuer_public_key(
                cast("CertificateIssuerPublicKeyTypes", ca_cert.public_key())), critical=False
        )
    )
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(_san_entries(sans)), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write_private(key_path, _key_pem(key))
    _write_private(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def make_tls(state_dir: str) -> dict[str, str]:
    """The sim CA, the API server certificate (127.0.0.1, localhost) and the admin client cert."""
    out_dir = os.path.join(state_dir, "tls")
    os.makedirs(out_dir, mode=0o700, exist_ok=True)
    tls = {"ca_cert": os.path.join(out_dir, "ca.crt"), "ca_key": os.path.join(out_dir, "ca.key")}
    if not (os.path.exists(tls["ca_cert"]) and os.path.exists(tls["ca_key"])):
        _make_ca(tls["ca_cert"], tls["ca_key"])
    tls["server_cert"], tls["server_key"] = issue_cert(
        tls, "kube-apiserver", ["127.0.0.1", "localhost", "::1"], client=False, server=True,
        out_dir=out_dir,
    )
    # kubeadm's admin.conf identity: CN kubernetes-admin in the system:masters group.
    tls["client_cert"], tls["client_key"] = issue_cert(
        tls, "kubernetes-admin", [], client=True, server=False, out_dir=out_dir,
        organization="system:masters",
    )
    return tls


def server_ssl_context(tls: dict[str, str]) -> ssl.SSLContext:
    """The HTTPS server's context: our certificate, and client certificates verified if sent.

    CERT_OPTIONAL lets a client authenticate with either the admin client certificate or the
    kubeconfig's bearer token (the Kubernetes API accepts both).
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(tls["server_cert"], tls["server_key"])
    ctx.load_verify_locations(tls["ca_cert"])
    ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def read_pem(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def client_identity(pem: str) -> tuple[str, list[str]]:
    """(common name, organizations) of a PEM client certificate the TLS layer already verified."""
    cert = x509.load_pem_x509_certificate(pem.encode("ascii"))
    cns = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    return (str(cns[0]) if cns else ""), orgs
