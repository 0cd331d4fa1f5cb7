"""The declaration of the `ext-plugin-pre-req` plugin: its configuration's schema and checks, read
by the Admin API (the plugin's phases: `gateways/edge/plugins/ext_plugin_pre_req.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.plugins.ext_proc import SCHEMA


class ExtPluginPreReq(Declaration):
    name = "ext-plugin-pre-req"
    priority = 12000
    schema: ClassVar[dict[str, Any]] = SCHEMA
