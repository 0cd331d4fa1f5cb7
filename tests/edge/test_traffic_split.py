"""traffic-split through a real data plane: real upstreams, a real HTTP client, the split
counted request by request."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from edge_kit import make_plugin, request, route, serve_edge, upstream

from controlplane.edge_config.schemas import check_plugins
from gateways.edge.dataplane.upstream import Timeouts
from gateways.edge.model.resources import ConfigRejected
from gateways.edge.model.schema import check
from gateways.edge.plugins import REGISTRY
from runtime.errors import InvalidRequest

SCHEMA = REGISTRY["traffic-split"].schema


def named(name: str) -> Any:
    """An upstream handler that answers its own name."""

    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=name)

    return handler


def nodes(port: int) -> dict[str, Any]:
    return {"type": "roundrobin", "nodes": {f"127.0.0.1:{port}": 1}}


async def served_by(edge: Any, path: str, n: int, **kwargs: Any) -> list[str]:
    out = []
    for _ in range(n):
        status, body, _ = await edge.call(path, **kwargs)
        assert status == 200, body
        out.append(body.decode())
    return out


def canary(weight: int) -> dict[str, Any]:
    """What the control plane's canary (PATCH /api/routes/:id/canary) writes."""
    return {
        "rules": [
            {"weighted_upstreams": [{"upstream_id": "canary", "weight": weight},
                                    {"weight": 100 - weight}]}
        ]
    }  # fmt: skip


async def test_canary_shape_splits_exactly_between_two_real_upstreams() -> None:
    async with (
        upstream(named("stable")) as stable,
        upstream(named("canary")) as canary_port,
        serve_edge() as edge,
    ):
        for weight, expected in ((25, 10), (50, 20), (0, 0), (100, 40)):
            edge.apply(
                upstreams=[{"id": "canary", **nodes(canary_port)}],
                routes=[route("r1", "/api/*", stable, plugins={"traffic-split": canary(weight)})],
            )
            seen = await served_by(edge, "/api/orders", 40)
            assert seen.count("canary") == expected, (weight, seen)
            assert seen.count("stable") == 40 - expected
            if weight == 25:  # smooth: one canary request in every 4, never a burst
                for start in range(0, 40, 4):
                    assert seen[start : start + 4].count("canary") == 1, seen


async def test_three_to_one_is_exactly_three_and_one_of_every_four() -> None:
    async with upstream(named("a")) as a, upstream(named("b")) as b, serve_edge() as edge:
        split = {"rules": [{"weighted_upstreams": [{"upstream": nodes(b), "weight": 3},
                                                   {"weight": 1}]}]}  # fmt: skip
        edge.apply(routes=[route("r1", "/x", a, plugins={"traffic-split": split})])
        seen = await served_by(edge, "/x", 20)
        for start in range(0, 20, 4):
            window = seen[start : start + 4]
            assert (window.count("b"), window.count("a")) == (3, 1), seen


async def test_first_matching_rule_wins_match_entries_are_ored_vars_anded() -> None:
    async with (
        upstream(named("route")) as own,
        upstream(named("vip")) as vip,
        upstream(named("beta")) as beta,
        serve_edge() as edge,
    ):
        split = {
            "rules": [
                {   # APISIX's documented example: all three conditions must hold
                    "match": [{"vars": [["arg_name", "==", "jack"], ["http_user-id", ">", "23"],
                                        ["http_apisix-key", "~~", "[a-z]+"]]}],
                    "weighted_upstreams": [{"upstream_id": "vip", "weight": 1}],
                },
                {   # either entry suffices
                    "match": [{"vars": [["http_x-beta", "==", "1"]]},
                              {"vars": [["cookie_beta", "==", "yes"]]}],
                    "weighted_upstreams": [{"upstream": nodes(beta)}],
                },
            ]
        }  # fmt: skip
        edge.apply(
            upstreams=[{"id": "vip", **nodes(vip)}],
            routes=[route("r1", "/x", own, plugins={"traffic-split": split})],
        )
        vip_headers = {"user-id": "30", "apisix-key": "hello"}
        assert await served_by(edge, "/x?name=jack", 1, headers=vip_headers) == ["vip"]
        assert await served_by(edge, "/x?name=jack", 1, headers={"user-id": "30"}) == ["route"]
        assert await served_by(edge, "/x?name=bob", 1, headers=vip_headers) == ["route"]
        assert await served_by(edge, "/x", 1, headers={"x-beta": "1"}) == ["beta"]
        assert await served_by(edge, "/x", 1, headers={"cookie": "beta=yes"}) == ["beta"]
        # both rules match: the first wins
        both = {**vip_headers, "x-beta": "1"}
        assert await served_by(edge, "/x?name=jack", 1, headers=both) == ["vip"]
        assert await served_by(edge, "/x", 1) == ["route"]  # no rule: the route's upstream


async def test_a_rule_without_match_always_applies_and_defaults() -> None:
    async with upstream(named("a")) as a, upstream(named("b")) as b, serve_edge() as edge:
        # weight defaults to 1: an even split; an entry with only a weight is the route's
        split = {"rules": [{"weighted_upstreams": [{"upstream": nodes(b)}, {}]}]}
        edge.apply(routes=[route("r1", "/x", a, plugins={"traffic-split": split})])
        assert sorted(await served_by(edge, "/x", 4)) == ["a", "a", "b", "b"]
        # no weighted_upstreams (default [{weight: 1}]), no rules, every weight 0: the route's
        conf: dict[str, Any]
        for conf in ({"rules": [{}]}, {}, {"rules": [{"weighted_upstreams": [
                {"upstream": nodes(b), "weight": 0}, {"weight": 0}]}]}):  # fmt: skip
            edge.apply(routes=[route("r1", "/x", a, plugins={"traffic-split": conf})])
            assert await served_by(edge, "/x", 3) == ["a", "a", "a"], conf


async def test_upstream_by_id_is_the_routes_compiled_upstream() -> None:
    async with upstream(named("a")) as a, upstream(named("b")) as b, serve_edge() as edge:
        split = {"rules": [{"weighted_upstreams": [{"upstream_id": "shared"},
                                                   {"upstream": nodes(b)}]}]}  # fmt: skip
        edge.apply(
            upstreams=[{"id": "shared", **nodes(b)}],
            routes=[
                {"id": "direct", "uri": "/direct", "upstream_id": "shared"},
                route("split", "/split", a, plugins={"traffic-split": split}),
            ],
        )
        assert edge.plane.compiled is not None
        router = edge.plane.compiled.router
        direct_route = router.match(request(path="/direct", route_id=""))
        split_route = router.match(request(path="/split", route_id=""))
        assert direct_route is not None and split_route is not None
        direct, target = direct_route.target, split_route.target
        (plugin,) = [p for p in target.chain.plugins if p.name == "traffic-split"]
        by_id, inline = plugin.rules[0].upstreams.items
        assert by_id is direct.upstream  # one keep-alive pool and passive health per id
        assert inline.timeouts == Timeouts(15, 15, 15)  # APISIX's inline default
        assert by_id.timeouts == Timeouts()  # an upstream by id keeps its own


async def test_missing_upstream_id_answers_500_as_apisix_and_keeps_the_version() -> None:
    async with upstream(named("a")) as a, upstream(named("b")) as b, serve_edge() as edge:
        split = {
            "rules": [
                {"match": [{"vars": [["arg_v", "==", "1"]]}],
                 "weighted_upstreams": [{"upstream": nodes(b)}]},
                {"match": [{"vars": [["arg_v", "==", "2"]]}],
                 "weighted_upstreams": [{"upstream_id": "gone", "weight": 1}, {"weight": 1}]},
            ]
        }  # fmt: skip
        edge.apply(routes=[route("r1", "/x", a, plugins={"traffic-split": split})])
        # rule 1 is checked and matches before rule 2's ids are looked at
        assert await served_by(edge, "/x?v=1", 1) == ["b"]
        for path in ("/x?v=2", "/x"):  # rule 2 reached: APISIX's 500, whatever else matches
            status, body, headers = await edge.call(path)
            assert status == 500
            assert body == b"failed to fetch upstream info by upstream id: gone"
            assert headers["Content-Type"] == "text/plain"
        assert edge.plane.compiled is not None
        assert edge.plane.compiled.version == edge.revision  # the version was applied


def test_a_bad_vars_expression_is_refused() -> None:
    with pytest.raises(ConfigRejected, match="unknown operator"):
        make_plugin("traffic-split", {"rules": [{"match": [{"vars": [["uri", "=~", "/a"]]}]}]})
    cls = REGISTRY["traffic-split"]
    bad = {"rules": [{"match": [{"vars": [["uri", "=~", "/a"]]}]}]}
    assert cls.check_conf(bad) == "failed to validate the 'vars' expression: unknown operator '=~'"
    assert cls.check_conf({"rules": [{"match": [{"vars": [["uri", "~~", "^/a"]]}]}]}) is None
    assert cls.check_conf({"rules": [{"match": [{}]}]}) is None  # no vars: always matches


def test_schema() -> None:
    one = {"upstream_id": "u"}
    assert check(SCHEMA, {}) is None
    assert check(SCHEMA, canary(10)) is None
    assert check(SCHEMA, {"rules": [{"weighted_upstreams": []}]}) == (
        'property "rules" validation failed: property "weighted_upstreams" validation failed: '
        "expect array to have at least 1 items"
    )
    assert check(SCHEMA, {"rules": [{"weighted_upstreams": [one] * 21}]}) is not None
    assert check(SCHEMA, {"rules": [{"weighted_upstreams": [one] * 20}]}) is None
    assert check(SCHEMA, {"rules": [{"weighted_upstreams": [{"weight": -1}]}]}) == (
        'property "rules" validation failed: property "weighted_upstreams" validation failed: '
        'property "weight" validation failed: expected -1 to be at least 0'
    )
    assert check(SCHEMA, {"rules": [{"weighted_upstreams": [{"weight": 1.5}]}]}) is not None
    assert check(SCHEMA, {"rules": [{"nope": 1}]}) == (
        'property "rules" validation failed: additional properties forbidden, found nope'
    )
    assert check(SCHEMA, {"rule": []}) == "additional properties forbidden, found rule"
    assert check(SCHEMA, {"rules": [{"match": [{"vars": "uri"}]}]}) is not None
    assert check(SCHEMA, {"rules": [{"weighted_upstreams": [{"upstream_id": "a b"}]}]}) == (
        'property "rules" validation failed: property "weighted_upstreams" validation failed: '
        'property "upstream_id" validation failed: object matches none of the required: '
        'failed to match pattern "^[a-zA-Z0-9\\-_.]+$" with "a b"'
    )
    # an inline upstream is checked as the Admin API checks an upstream
    no_nodes = {"rules": [{"weighted_upstreams": [{"upstream": {"type": "roundrobin"}}]}]}
    assert check(SCHEMA, no_nodes) is not None
    bad_type = {"rules": [{"weighted_upstreams": [{"upstream": {**nodes(1), "type": "x"}}]}]}
    assert "matches none of the enum values" in check(SCHEMA, bad_type)  # type: ignore[operator]


def test_admin_api_check() -> None:
    check_plugins({"traffic-split": canary(30)})
    # like APISIX, an upstream_id is not looked up when the configuration is written
    check_plugins({"traffic-split": {"rules": [{"weighted_upstreams": [{"upstream_id": "x"}]}]}})
    bad = {"rules": [{"match": [{"vars": [["arg_a", "==="]]}]}]}
    with pytest.raises(InvalidRequest) as refused:
        check_plugins({"traffic-split": bad})
    assert str(refused.value).startswith(
        "failed to check the configuration of plugin traffic-split err: "
        "failed to validate the 'vars' expression: "
    )
