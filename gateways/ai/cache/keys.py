"""What identifies a cached answer: the exact key (spec, "Other stored structures":
`{tenant_id}:{model}:{prompt_hash}`) and the semantic tier's scope.

`prompt_hash` is the sha256 (hex) of canonical JSON (sorted keys, no spaces, UTF-8) of every
input that changes the answer:
- the tenant and the model (again, although they prefix the key: a `:` inside a tenant id or
  a model name, e.g. `llama3:8b`, must not let two prefixes collide);
- every message, whole: role, content, and any `name`, `tool_calls`, `tool_call_id`;
- every generation parameter the request sent (`temperature`, `top_p`, `max_tokens`, `n`,
  `stop`, `tools`, `tool_choice`, `response_format`, `seed`, `logprobs`, …), unknown ones
  included: a field this module has never heard of is assumed to change the answer.

Left out, because they change how the answer is delivered or recorded, not what it says:
`stream` and `stream_options` (streams bypass the cache), `user` (the end user's id for the
provider's abuse monitoring: keeping it would split one tenant's cache per end user, and the
tenant is the isolation boundary the spec sets), `metadata` and `store` (provider-side
storage of the completion).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

NOT_IN_KEY = frozenset({"stream", "stream_options", "user", "metadata", "store"})


def _digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def generation_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The request's fields (besides model and messages) that change the answer."""
    return {k: v for k, v in params.items() if k not in NOT_IN_KEY}


def prompt_hash(
    tenant: str, model: str, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any]
) -> str:
    return _digest(
        {"tenant": tenant, "model": model, "messages": list(messages),
         "params": generation_params(params)}
    )  # fmt: skip


def exact_key(
    tenant: str, model: str, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any]
) -> str:
    """The exact tier's key of a request."""
    return cache_key(tenant, model, prompt_hash(tenant, model, messages, params))


def cache_key(tenant: str, model: str, hashed: str) -> str:
    """`{tenant_id}:{model}:{prompt_hash}` (spec), the tenant's braces kept: its hash tag (a
    tenant's keys share one cluster slot). Ephemeral (a TTL): not renamed."""
    return f"{{{tenant}}}:{model}:{hashed}"


def scope(
    tenant: str, model: str, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any]
) -> str:
    """The semantic tier's partition of meaning: the conversation before the last message,
    the last message's role, and the generation parameters (with tenant and model). Two
    requests may share an answer by similarity only when everything but the wording of
    their last message is identical."""
    *prefix, last = messages
    return _digest(
        {"tenant": tenant, "model": model, "prefix": prefix, "role": last.get("role"),
         "params": generation_params(params)}
    )  # fmt: skip


def digest(text: str) -> str:
    """A fixed-length hex name for a tenant or model inside the vector store's filters."""
    return hashlib.sha256(text.encode()).hexdigest()
