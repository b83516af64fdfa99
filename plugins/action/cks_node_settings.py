# Copyright (c) 2026 cloudstack.cks contributors
# Apache License 2.0 (see LICENSE)
"""The action of cloudstack.cks.cks_node_settings: run in the controller when the task runs there (see
plugin_utils/in_process.py), else the module shipped as usual."""

from __future__ import annotations

from ansible_collections.cloudstack.cks.plugins.modules import cks_node_settings
from ansible_collections.cloudstack.cks.plugins.plugin_utils.in_process import InProcessModuleAction


class ActionModule(InProcessModuleAction):
    MODULE = cks_node_settings
