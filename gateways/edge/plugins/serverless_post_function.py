"""`serverless-post-function` (APISIX priority -2000): `serverless-pre-function` run at the end
of its phase instead of the start; the same schema, functions and deliberate difference from
APISIX (installed Python functions named in `functions`, never code from the network: see
`serverless_pre_function`)."""

from __future__ import annotations

from gateways.edge.model.plugins import serverless_post_function as declared
from gateways.edge.plugins.serverless_pre_function import ServerlessPreFunction


class ServerlessPostFunction(declared.ServerlessPostFunction, ServerlessPreFunction):
    """Runs installed Python functions, named in `functions`, at the end of `phase`."""
