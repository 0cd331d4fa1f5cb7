"""serverless-post-function: serverless-pre-function's plugin at the end of the phase."""

from __future__ import annotations

from typing import Any

from edge_kit import route, serve_edge, upstream

from gateways.edge.functions import edge_function
from gateways.edge.plugin import RequestContext
from gateways.edge.plugins import REGISTRY


@edge_function
def mark(conf: Any, ctx: RequestContext) -> None:
    order = ctx.vars.setdefault("order", [])
    order.append(conf["mark"])
    ctx.upstream_headers["x-order"] = ",".join(order)


async def test_runs_after_the_pre_function_in_the_same_phase() -> None:
    functions = [f"{__name__}:mark"]
    async with upstream() as port, serve_edge() as edge:
        edge.apply(
            routes=[
                route("r1", "/a", port, plugins={
                    "serverless-post-function": {"phase": "rewrite", "functions": functions,
                                                 "mark": "post"},
                    "serverless-pre-function": {"phase": "rewrite", "functions": functions,
                                                "mark": "pre"},
                })
            ]
        )  # fmt: skip
        status, body, _ = await edge.call("/a")
    assert status == 200 and body["headers"]["x-order"] == "pre,post"


def test_same_schema_lower_priority() -> None:
    post, pre = REGISTRY["serverless-post-function"], REGISTRY["serverless-pre-function"]
    assert post.schema is pre.schema
    assert (post.priority, pre.priority) == (-2000, 10000)
    assert post.__doc__ and post.__doc__.splitlines()[0].endswith("at the end of `phase`.")
