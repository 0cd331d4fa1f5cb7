"""The declaration of the `serverless-post-function` plugin: `serverless-pre-function`'s, under its
own name and priority (the plugin's phases:
`gateways/edge/plugins/serverless_post_function.py`)."""

from __future__ import annotations

from gateways.edge.model.plugins.serverless_pre_function import ServerlessPreFunction


class ServerlessPostFunction(ServerlessPreFunction):
    name = "serverless-post-function"
    priority = -2000
