"""The declaration of the `ext-plugin-post-resp` plugin: its configuration's schema and checks,
read by the Admin API (the plugin's phases: `gateways/edge/plugins/ext_plugin_post_resp.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.plugins.ext_proc import SCHEMA


class ExtPluginPostResp(Declaration):
    name = "ext-plugin-post-resp"
    priority = -4000
    schema: ClassVar[dict[str, Any]] = SCHEMA
