"""Sphinx configuration of the collection docsite (`make docs`).

Written from what ``antsibull-docs sphinx-init`` generates for one collection, with two changes
for a build that must pass without a network and with every warning an error: no intersphinx
(its inventories are downloaded), and the few labels of Ansible's own documentation that the
generated plugin pages refer to resolved here to their docs.ansible.com pages instead.
"""

from __future__ import annotations

from typing import Any, Optional

from docutils import nodes

project = "cloudstack.cks"
copyright = "cloudstack.cks contributors"  # pylint: disable=redefined-builtin
title = "cloudstack.cks"
html_short_title = "cloudstack.cks"

extensions = ["sphinx.ext.autodoc", "sphinx_antsibull_ext"]

pygments_style = "ansible"
# The guides' plain literal blocks are command output and diagrams, not YAML: the plugin pages
# name their examples' language themselves (yaml+jinja).
highlight_language = "none"

html_theme = "sphinx_ansible_theme"
html_show_sphinx = False
display_version = False
html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False

default_role = "any"
nitpicky = True

# Ansible's documentation, where the generated pages point for what ansible-core documents.
ANSIBLE_DOCS = "https://docs.ansible.com/projects/ansible/devel/"
ANSIBLE_LABELS = {
    "action_plugins": "plugins/action.html#action-plugins",
    "callback_plugins": "plugins/callback.html#callback-plugins",
    "common_return_values": "reference_appendices/common_return_values.html#common-return-values",
    "ansible_configuration_settings": "reference_appendices/config.html#ansible-configuration-settings",
}


def ansible_reference(app: Any, env: Any, node: Any, contnode: Any) -> Optional[nodes.reference]:
    """A reference into Ansible's documentation; any other missing target stays a warning (an error)."""
    domain, reftype, target = node.get("refdomain"), node.get("reftype"), node.get("reftarget", "")
    if domain != "std":
        return None
    if reftype == "ref" and target in ANSIBLE_LABELS:
        uri = ANSIBLE_DOCS + ANSIBLE_LABELS[target]
    elif reftype == "envvar" and target.startswith("ANSIBLE_"):
        uri = f"{ANSIBLE_DOCS}reference_appendices/config.html#envvar-{target}"
    else:
        return None
    reference = nodes.reference("", "", internal=False, refuri=uri)
    reference += contnode
    return reference


def setup(app: Any) -> dict[str, Any]:
    app.connect("missing-reference", ansible_reference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
