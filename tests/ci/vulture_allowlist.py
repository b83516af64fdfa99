# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""Names `make lint`'s dead-code check (vulture) must not report: read by Ansible, by a library or
by name at run time, or a member of a table kept whole. What Ansible calls by name in every plugin
(DOCUMENTATION, FilterModule, v2_* ...) is in the Makefile's --ignore-names instead. Never imported."""

# ruff: noqa

TRANSFERS_FILES  # ActionBase reads it (plugins/plugin_utils/in_process.py)
is_conditional  # the signature of CallbackBase.v2_playbook_on_task_start
handle_starttag, handle_data, handle_endtag  # HTMLParser calls them (tests/docs/test_docsite.py)
log_request  # BaseHTTPRequestHandler calls it (tests/sim/tests/kubekit.py)
do_GET, log_message, close_connection  # BaseHTTPRequestHandler calls and reads them (tests/unit/test_request_kinds.py)
HANDLER_MODULES  # importing them registers their @handler commands (cks-sim cloudstack_api.py)
CertificateIssuerPublicKeyTypes  # named in a typing cast's string (cks-sim tls.py)
# One table each, kept whole so a reader sees every value: asyncjob's job status, the exec
# protocol's channels, the Event reasons, CloudStack's legacy rate-limit text.
JOB_FAILED
RESIZE
PUT_BACK, LEFT_CORDONED
LEGACY_LIMIT_TEXT
tty  # a field of the exec request the sim parses (kube_exec.py)
