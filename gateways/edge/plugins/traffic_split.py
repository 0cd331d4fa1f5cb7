"""`traffic-split` (APISIX priority 966, access): sends shares of a route's requests to other
upstreams (canary releases, blue-green, A/B by request attributes).

- `rules` are tried in order and the first that matches chooses: a rule without `match`
  always matches; a rule's `match` entries are OR'ed, the conditions of one entry's `vars`
  (lua-resty-expr, `gateways/edge/variables.py`) AND'ed; an entry without `vars` matches.
- Among the matching rule's `weighted_upstreams` the choice is nginx's smooth weighted round
  robin, per worker and deterministic: weights 3:1 send exactly 3 and 1 of every 4 requests,
  weight 0 is never chosen. An entry with only a `weight` is the route's own upstream (also
  when every weight is 0); no matching rule leaves the route's upstream.
- Upstreams are resolved when the configuration version compiles: an `upstream_id` is the
  compiled upstream the routes share (one keep-alive pool and passive health per id), an
  inline `upstream` is compiled once. The proxy then forwards to `ctx.upstream`, with that
  upstream's own timeouts.
- An `upstream_id` that does not exist: the Admin API accepts it and the request is answered
  500 `failed to fetch upstream info by upstream id: <id>`, as APISIX does (PR #10008: the
  ids of each rule are checked, in order, up to the rule that matches). The configuration
  version is not refused, so one stale reference cannot hold back every later version.

Deliberate differences: an inline upstream is used whole (APISIX copies only its nodes,
balancer, hash key and host settings into a new upstream, dropping e.g. `scheme`, `retries`,
`checks` and `keepalive_pool`); like APISIX, its timeouts default to 15 s when it sets none.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import traffic_split as declared
from gateways.edge.model.plugins.traffic_split import condition
from gateways.edge.model.resources import UPSTREAMS, ConfigRejected
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.variables import Condition

log = logging.getLogger(__name__)

INLINE_TIMEOUT = {"connect": 15, "send": 15, "read": 15}  # APISIX's set_upstream default
NOT_FOUND = "failed to fetch upstream info by upstream id: "


class SmoothWeighted:
    """nginx's smooth weighted round robin over `choices` [(item, weight)]: 5:1:1 gives
    a a b a c a a, never a burst of one item; weight 0 is never chosen."""

    __slots__ = ("current", "items", "total", "weights")

    def __init__(self, choices: Sequence[tuple[Any, int]]) -> None:
        kept = [(item, weight) for item, weight in choices if weight > 0]
        self.items = [item for item, _ in kept]
        self.weights = [weight for _, weight in kept]
        self.current = [0] * len(kept)
        self.total = sum(self.weights)

    def next(self) -> Any:
        """The next item; None when no item has a weight."""
        if not self.items:
            return None
        best = 0
        current = self.current
        for i, weight in enumerate(self.weights):
            current[i] += weight
            if current[i] > current[best]:
                best = i
        current[best] -= self.total
        return self.items[best]


class Rule:
    """One rule: when it matches, and the round robin over its upstreams (None stands for the
    route's own upstream)."""

    __slots__ = ("conditions", "missing", "upstreams")

    def __init__(
        self, conditions: list[Condition] | None, upstreams: SmoothWeighted, missing: str | None
    ) -> None:
        self.conditions = conditions  # None: no `match`, always applies
        self.upstreams = upstreams
        self.missing = missing  # an upstream_id absent from the configuration

    def matches(self, ctx: RequestContext) -> bool:
        return self.conditions is None or any(test(ctx) for test in self.conditions)


@dataclass(frozen=True, slots=True)
class TrafficSplitConf:
    rules: list[dict[str, Any]] | None = None  # each parsed as a RuleConf


@dataclass(frozen=True, slots=True)
class RuleConf:
    weighted_upstreams: list[dict[str, Any]]  # each parsed as a WeightedUpstreamConf
    match: list[dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class WeightedUpstreamConf:
    weight: int
    upstream_id: str | int | None = None
    upstream: dict[str, Any] | None = None  # inline, as written (UPSTREAM has no defaults)


class TrafficSplit(declared.TrafficSplit, Plugin):
    """Splits a route's traffic between upstreams by weight and request conditions."""

    def __init__(self, conf: Mapping[str, Any], env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(TrafficSplitConf, self.schema, conf)
        self.rules = [self._rule(rule, env) for rule in settings.rules or ()]

    def _rule(self, conf: Mapping[str, Any], env: PluginEnv) -> Rule:
        # array items get no defaults from the plugin's schema: each is parsed with its own
        rule_schema = self.schema["properties"]["rules"]["items"]
        entry_schema = rule_schema["properties"]["weighted_upstreams"]["items"]
        rule = parse_conf(RuleConf, rule_schema, conf)
        conditions = None
        if rule.match is not None:
            conditions = [condition(match.get("vars")) for match in rule.match]
        choices: list[tuple[Any, int]] = []
        missing = None
        for entry in rule.weighted_upstreams or [{"weight": 1}]:
            weighted = parse_conf(WeightedUpstreamConf, entry_schema, entry)
            weight = int(weighted.weight)
            if weighted.upstream_id is not None:
                ident = str(weighted.upstream_id)
                if _known(env, ident):
                    choices.append((_resolve(env, ident), weight))
                else:
                    missing = missing or ident
            elif weighted.upstream is not None:
                inline = {"timeout": INLINE_TIMEOUT, **weighted.upstream}
                choices.append((_resolve(env, inline), weight))
            else:
                choices.append((None, weight))
        return Rule(conditions, SmoothWeighted(choices), missing)

    async def access(self, ctx: RequestContext) -> Reply | None:
        for rule in self.rules:
            if rule.missing is not None:
                log.error(
                    "traffic-split names an upstream that does not exist",
                    extra={"route_id": ctx.route_id, "upstream_id": rule.missing},
                )
                body = (NOT_FOUND + rule.missing).encode()
                return Reply(500, body, {"content-type": "text/plain"})
            if rule.matches(ctx):
                upstream = rule.upstreams.next()
                if upstream is not None:
                    ctx.upstream = upstream
                return None
        return None


def _known(env: PluginEnv, ident: str) -> bool:
    snapshot = env.snapshot
    return snapshot is not None and ident in snapshot.of(UPSTREAMS)


def _resolve(env: PluginEnv, ident: str | Mapping[str, Any]) -> Any:
    if env.upstream is None:
        raise ConfigRejected("traffic-split: upstreams resolve only while a configuration compiles")
    return env.upstream(ident, "plugin traffic-split")
