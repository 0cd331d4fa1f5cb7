"""The declaration of the `traffic-split` plugin: its configuration's schema and checks, read by
the Admin API (the plugin's phases: `gateways/edge/plugins/traffic_split.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from gateways.edge.model.declaration import Declaration
from gateways.edge.model.resource_schemas import ID, UPSTREAM
from gateways.edge.model.resources import ConfigRejected
from gateways.edge.variables import Condition, compile_vars


def condition(vars_expr: Any) -> Condition:
    """A `match` entry's `vars` as a condition (ConfigRejected when it does not compile)."""
    if not vars_expr:  # lua-resty-expr: an empty expression holds
        return lambda ctx: True
    return compile_vars(vars_expr)


class TrafficSplit(Declaration):
    name = "traffic-split"
    priority = 966
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "rules": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "match": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {"vars": {"type": "array"}},
                            },
                        },
                        "weighted_upstreams": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "upstream_id": ID,
                                    "upstream": UPSTREAM,
                                    "weight": {"type": "integer", "default": 1, "minimum": 0},
                                },
                            },
                            "default": [{"weight": 1}],
                            "minItems": 1,
                            "maxItems": 20,
                        },
                    },
                    "additionalProperties": False,
                },
            }
        },
        "additionalProperties": False,
    }

    @classmethod
    def check_conf(cls, conf: Mapping[str, Any]) -> str | None:
        for rule in conf.get("rules") or ():
            for match in rule.get("match") or ():
                try:
                    condition(match.get("vars"))
                except ConfigRejected as exc:
                    reason = str(exc).removeprefix("vars: ")
                    return f"failed to validate the 'vars' expression: {reason}"
        return None
