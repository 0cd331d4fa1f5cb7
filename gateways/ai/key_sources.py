"""A provider's API key, from its key source (spec: "Key source variants").

- `env_var` {var_name}: this AI gateway process's environment (read per call, so a rotated
  variable in a restarted process needs nothing else; the name is dynamic, which is why this
  one module reads `os.environ` below `__main__`);
- `manual`: the secret stored apart in `{platform:providers}:secrets`, only when
  ENVIRONMENT=development (loaded with the provider table, `provider_table.py`);
- `none`: no key.

Every other type (`vault`, `k8s_secret`, `aws_secrets_manager`, `azure_key_vault`) is not
supported yet: `KeyUnavailable`. The pipeline skips such a provider (the next of the chain is
tried; none left: 400 `model_not_found` naming the provider and the reason, never a secret),
and `GET /v1/models` does not list its models. A key is never logged, rendered or traced:
`ProviderTarget.api_key` is excluded from its repr, and messages name only the variable or the
source type.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from gateways.ai.provider_table import Provider, Snapshot


class KeyUnavailable(Exception):
    """The provider's key cannot be resolved (the message names no secret)."""


def resolve_key(
    provider: Provider,
    snapshot: Snapshot,
    *,
    development: bool,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    source = provider.key_source
    kind = str(source.get("type") or "none")
    if kind == "none":
        return None
    if kind == "env_var":
        name = str(source.get("var_name") or "")
        value = (os.environ if environ is None else environ).get(name) if name else None
        if not value:
            raise KeyUnavailable(
                f"provider {provider.id!r}: its key variable {name or '(unnamed)'} is not set "
                "in the AI gateway's environment"
            )
        return value
    if kind == "manual":
        if not development:
            raise KeyUnavailable(
                f"provider {provider.id!r}: manual keys are used only when ENVIRONMENT=development"
            )
        secret = snapshot.secrets.get(provider.id)
        if not secret:
            raise KeyUnavailable(f"provider {provider.id!r}: no manual key is stored")
        return secret
    raise KeyUnavailable(
        f"provider {provider.id!r}: key source type {kind!r} is not supported yet "
        "(env_var, manual and none are)"
    )
