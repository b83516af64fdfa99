# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The CloudStack connection options (argument spec: ``module_utils.ansible_module.cloudstack_argument_spec``)."""

from __future__ import annotations


class ModuleDocFragment:

    DOCUMENTATION = r"""
options:
  api_url:
    description:
      - URL of the CloudStack API, for example V(https://cloud.example.com/client/api).
      - If not given, the E(CLOUDSTACK_ENDPOINT) environment variable is used.
      - If neither O(api_url) nor O(api_key) is given anywhere, the settings are read from the
        C(cs) library's configuration as its CLI does - C(cloudstack.ini) in the current directory,
        C(~/.cloudstack.ini) or the file named by E(CLOUDSTACK_CONFIG), section E(CLOUDSTACK_REGION)
        (default V(cloudstack)). Options given here still win over the file.
    type: str
  api_key:
    description:
      - API key of the CloudStack user.
      - If not given, the E(CLOUDSTACK_KEY) environment variable is used.
    type: str
  api_secret:
    description:
      - Secret key of the CloudStack user. It signs every request and is never sent or shown.
      - If not given, the E(CLOUDSTACK_SECRET) environment variable is used.
    type: str
  api_http_method:
    description:
      - HTTP method used to call the API.
      - If not given, the E(CLOUDSTACK_METHOD) environment variable is used, then C(cloudstack.ini),
        then V(get).
    type: str
    choices: [get, post]
  api_timeout:
    description:
      - Timeout of one HTTP request, in seconds. Waits for async jobs are bounded separately by
        each module's deadline.
      - If not given, the E(CLOUDSTACK_TIMEOUT) environment variable is used, then C(cloudstack.ini),
        then V(10).
    type: int
  api_verify_ssl_cert:
    description:
      - Path of a CA bundle to verify the API's TLS certificate with, instead of the system CAs.
      - If not given, the E(CLOUDSTACK_VERIFY) environment variable is used.
    type: str
  validate_certs:
    description:
      - If V(false), the API's TLS certificate is not verified. Only for test endpoints with
        self-signed certificates; a CA bundle in O(api_verify_ssl_cert) is the better fix.
      - V(false) wins over O(api_verify_ssl_cert).
      - If not given, the E(CLOUDSTACK_DANGEROUS_NO_TLS_VERIFY) environment variable is used,
        read as its name says - V(true) means do B(not) verify, as in the C(cs) library.
        This differs from C(ngine_io.cloudstack), which copies that variable into O(validate_certs)
        unchanged; here a value set for that behaviour can only make the module verify.
      - Defaults to V(true).
    type: bool
requirements:
  - cs >= 5.0
notes:
  - Read-only API calls (C(list*), C(query*), C(get*)) are retried on connection errors, HTTP 429 and
    5xx answers that are not CloudStack's own error codes, with exponential backoff, within the
    step's deadline. Calls that change something are never retried; if one loses its connection,
    the module re-reads the state before deciding again.
"""
