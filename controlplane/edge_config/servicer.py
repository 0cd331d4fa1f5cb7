"""`strata.edge.v1.EdgeConfigService`: APISIX's Admin API v3 over the edge configuration,
with APISIX's semantics (reference sections 1.2-1.5). Every write reads the whole
configuration, checks the new resource against it (schemas, plugin schemas, references,
unique credentials, one global rule per plugin) and commits only if nothing changed in
between (`EdgeConfigStore.write`); a concurrent change makes it check again."""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable, Collection, Iterator
from typing import Any, TypeVar

from google.protobuf import struct_pb2

from controlplane.edge_config.schemas import bad, check_plugins, check_resource
from controlplane.edge_config.store import Conflict, EdgeConfigStore, Entry, Op, State
from gateways.edge.model import (
    CONSUMER_GROUPS,
    CONSUMERS,
    DECLARATIONS,
    GLOBAL_RULES,
    KINDS,
    PATCHABLE,
    PLUGIN_CONFIGS,
    POSTABLE,
    PROTOS,
    ROUTES,
    SERVICES,
    UPSTREAMS,
    MissingReference,
    Snapshot,
)
from gateways.edge.model.credentials import Refused, duplicate_holder, stored_plugins
from gateways.edge.model.credentials import shown as shown_credentials
from runtime.context import ServicerContext, respond
from runtime.errors import InvalidRequest, MethodNotAllowed, NotFound, Unavailable
from runtime.keyring import Keyring
from runtime.protojson import plain_json
from strata.edge.v1 import admin_pb2, admin_pb2_grpc

T = TypeVar("T")

SINGULAR = {
    ROUTES: "route",
    SERVICES: "service",
    UPSTREAMS: "upstream",
    CONSUMERS: "consumer",
    CONSUMER_GROUPS: "consumer group",
    GLOBAL_RULES: "global rule",
    PLUGIN_CONFIGS: "plugin config",
    PROTOS: "proto",
}
# Reference fields: (kind holding it, field) → the kind it names.
REFERENCES = {
    ROUTES: (("upstream_id", UPSTREAMS), ("service_id", SERVICES),
             ("plugin_config_id", PLUGIN_CONFIGS)),
    SERVICES: (("upstream_id", UPSTREAMS),),
    CONSUMERS: (("group_id", CONSUMER_GROUPS),),
}  # fmt: skip
# How APISIX words a refused delete of a referenced resource.
IN_USE = {
    UPSTREAMS: "can not delete this upstream",
    SERVICES: "can not delete this service directly",
    PLUGIN_CONFIGS: "can not delete this plugin config",
    CONSUMER_GROUPS: "can not delete this consumer group",
    PROTOS: "can not delete this proto",
}
# Resources holding plugins, whose configurations may name another resource (`Plugin.
# references`), in the order a refused delete names them (APISIX checks routes, then services).
PLUGIN_HOLDERS = (ROUTES, SERVICES, PLUGIN_CONFIGS, GLOBAL_RULES, CONSUMER_GROUPS, CONSUMERS)
# The kinds plugin configurations name.
REFERENCED = frozenset(
    kind for plugin in DECLARATIONS.values() for kind in plugin.references.values()
)
FORBIDDEN = ("create_time", "update_time")
V3 = {"X-API-VERSION": "v3"}
RETRIES = 50
# A change `EdgeConfigServicer.write` applies: (kind, id, value), None deleting.
Change = tuple[str, str, dict[str, Any] | None]


def key_not_found() -> NotFound:
    return NotFound("Key not found", error="key_not_found")


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(value)
    return message


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396: objects merge, `null` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


class EdgeConfigServicer(admin_pb2_grpc.EdgeConfigServiceServicer):
    def __init__(self, store: EdgeConfigStore, keyring: Keyring) -> None:
        self.store = store
        self.keyring = keyring  # consumers' secrets at rest (gateways/edge/model/credentials.py)

    # --- reads ---------------------------------------------------------------------------

    async def ListResources(
        self, request: admin_pb2.ListResourcesRequest, context: ServicerContext
    ) -> admin_pb2.ListResourcesResponse:
        kind = _kind(request.kind)
        if request.HasField("page_size") and not 10 <= request.page_size <= 500:
            raise InvalidRequest("page_size must be between 10 and 500")
        state = await self.store.load()
        entries = sorted(state.of(kind).items(), key=lambda item: item[1].created_index)
        name, uri = _pattern(request, "name"), _pattern(request, "uri")
        found = [(id_, e) for id_, e in entries if _matches(request, name, uri, e.value)]
        if request.HasField("page") or request.HasField("page_size"):
            size = request.page_size or 10
            start = (max(request.page, 1) - 1) * size
            shown = found[start : start + size]
        else:
            shown = found
        respond(context, headers=V3)
        return admin_pb2.ListResourcesResponse(
            total=len(found), list=[_item(kind, id_, e) for id_, e in shown]
        )

    async def GetResource(
        self, request: admin_pb2.GetResourceRequest, context: ServicerContext
    ) -> admin_pb2.GetResourceResponse:
        kind = _kind(request.kind)
        entry = (await self.store.load()).of(kind).get(request.id)
        if entry is None:
            raise key_not_found()
        respond(context, headers=V3)
        item = _item(kind, request.id, entry)
        return admin_pb2.GetResourceResponse(
            key=item.key,
            value=item.value,
            createdIndex=item.createdIndex,
            modifiedIndex=item.modifiedIndex,
        )

    # --- writes --------------------------------------------------------------------------

    async def PutResource(
        self, request: admin_pb2.PutResourceRequest, context: ServicerContext
    ) -> admin_pb2.PutResourceResponse:
        kind = _kind(request.kind)
        body = plain_json(request.resource)
        _refuse_forbidden(body)
        id_ = _put_id(kind, request.id, body)
        value, created = await self._save(kind, id_, lambda _: body)
        respond(context, status=201 if created else 200, headers=V3)
        return admin_pb2.PutResourceResponse(key=_key(kind, id_), value=struct(shown(kind, value)))

    async def CreateResource(
        self, request: admin_pb2.CreateResourceRequest, context: ServicerContext
    ) -> admin_pb2.CreateResourceResponse:
        kind = _kind(request.kind)
        if kind not in POSTABLE:
            raise MethodNotAllowed(f"not supported `POST` method for {SINGULAR[kind]}")
        body = plain_json(request.resource)
        if "id" in body:
            raise bad(f"wrong {SINGULAR[kind]} id, do not need it")
        _refuse_forbidden(body)
        id_ = await self.store.next_id()
        value, _ = await self._save(kind, id_, lambda _: {**body, "id": id_})
        respond(context, status=201, headers=V3)
        return admin_pb2.CreateResourceResponse(
            key=_key(kind, id_), value=struct(shown(kind, value))
        )

    async def PatchResource(
        self, request: admin_pb2.PatchResourceRequest, context: ServicerContext
    ) -> admin_pb2.PatchResourceResponse:
        kind = _kind(request.kind)
        if kind not in PATCHABLE:
            raise MethodNotAllowed(f"not supported `PATCH` method for {SINGULAR[kind]}")
        patch = plain_json(request.patch)
        steps = [s for s in request.path.split("/") if s]

        def patched(existing: Entry | None) -> dict[str, Any]:
            if existing is None:
                raise key_not_found()
            current = copy.deepcopy(existing.value)
            if steps:
                _set_path(current, steps, patch)
                return current
            if not isinstance(patch, dict):
                raise bad("invalid configuration: the patch must be a JSON object")
            return {**merge_patch(current, patch), "id": request.id}

        value, _ = await self._save(kind, request.id, patched, must_exist=True)
        respond(context, status=200, headers=V3)
        return admin_pb2.PatchResourceResponse(
            key=_key(kind, request.id), value=struct(shown(kind, value))
        )

    async def DeleteResource(
        self, request: admin_pb2.DeleteResourceRequest, context: ServicerContext
    ) -> admin_pb2.DeleteResourceResponse:
        kind, id_ = _kind(request.kind), request.id

        def change(state: State) -> tuple[list[Op], None]:
            if id_ not in state.of(kind):
                raise key_not_found()
            if not request.force:
                user = _first_user(state, kind, id_)
                if user is not None:
                    raise bad(
                        f"{IN_USE[kind]}, {SINGULAR[user[0]]} [{user[1]}] is still using it now"
                    )
            return [(kind, id_, None)], None

        await self._commit(change)
        respond(context, headers=V3)
        return admin_pb2.DeleteResourceResponse(deleted=id_, key=_key(kind, id_))

    async def modify(
        self,
        kind: str,
        id_: str,
        build: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        unchecked: Collection[str] = (),
    ) -> dict[str, Any]:
        """For the control plane's own features (route lifecycle, canary): rewrite an existing
        resource from its current value in one atomic write, checked as an Admin API write.
        `build` gets a copy of the stored value without `create_time`/`update_time` and
        returns the new one (it may run again when a concurrent write lands first; raising
        aborts). Plugins the resource already carries stay accepted as they were stored (the
        reference routes' plugins seeded before they were built). NotFound `key_not_found`
        when absent; returns the stored value."""
        stored = (await self.store.load()).of(kind).get(id_)
        carried = (stored.value.get("plugins") or {}) if stored is not None else {}
        accepted = {*unchecked, *(carried if isinstance(carried, dict) else ())}

        def rebuilt(existing: Entry | None) -> dict[str, Any]:
            assert existing is not None  # must_exist
            current = copy.deepcopy(existing.value)
            for name in FORBIDDEN:
                current.pop(name, None)
            return build(current)

        value, _ = await self._save(kind, id_, rebuilt, must_exist=True, unchecked=accepted)
        return value

    # --- plugins -------------------------------------------------------------------------

    async def ListPlugins(
        self, request: admin_pb2.ListPluginsRequest, context: ServicerContext
    ) -> admin_pb2.ListPluginsResponse:
        _subsystem(request.subsystem)
        if request.subsystem == "stream":
            return admin_pb2.ListPluginsResponse()  # no stream plugin is implemented
        ordered = sorted(DECLARATIONS.values(), key=lambda p: (-p.priority, p.name))
        return admin_pb2.ListPluginsResponse(plugins=[p.name for p in ordered])

    async def GetPlugin(
        self, request: admin_pb2.GetPluginRequest, context: ServicerContext
    ) -> admin_pb2.GetPluginResponse:
        _subsystem(request.subsystem)
        plugin = DECLARATIONS.get(request.name)
        if plugin is None:
            raise NotFound(f"plugin not found in subsystem {request.subsystem or 'http'}")
        schema = plugin.consumer_schema if request.schema_type == "consumer" else plugin.schema
        if schema is None:
            raise InvalidRequest("not found schema")
        schema = copy.deepcopy(schema)
        schema.setdefault("properties", {})["_meta"] = {"type": "object"}  # as APISIX injects
        return admin_pb2.GetPluginResponse(schema=struct(schema))

    # --- in-process writes of other control plane services ---------------------------------

    async def write(self, plan: Callable[[State], tuple[list[Change], T]]) -> T:
        """One atomic change of several resources, for the control plane's own services (an
        API key's consumer, a tenant's consumer group). `plan` reads the current configuration
        and returns the changes — `(kind, id, value)` to put (the id field, `username` for
        consumers, is set from `id`) or `(kind, id, None)` to delete (absent: nothing to do) —
        and a result. Each change is checked as an Admin API write is (schemas, plugin schemas,
        references, unique credentials; a referenced resource is not deleted), against the
        configuration with the changes before it applied, and all are committed in one
        revision or none is. `plan` may raise to abort; it runs again when another write
        lands in between. Returns `plan`'s result."""

        def change(state: State) -> tuple[list[Op], T]:
            changes, result = plan(state)
            working = State(state.revision, {k: dict(v) for k, v in state.entries.items()})
            revision, now, ops = state.revision + 1, int(time.time()), []
            for kind, id_, wanted in changes:
                _kind(kind)
                existing = working.of(kind).get(id_)
                entry: Entry | None = None
                if wanted is None:
                    if existing is None:
                        continue
                    user = _first_user(working, kind, id_)
                    if user is not None:
                        raise bad(
                            f"{IN_USE[kind]}, {SINGULAR[user[0]]} [{user[1]}] is still using it"
                        )
                    del working.entries[kind][id_]
                else:
                    value = {**wanted, ("username" if kind == CONSUMERS else "id"): id_}
                    if kind == CONSUMERS and isinstance(value.get("plugins"), dict):
                        value["plugins"] = self._stored_credentials(
                            working, id_, value["plugins"], existing
                        )
                    created = existing.value.get("create_time", now) if existing else now
                    value.update(create_time=created, update_time=now)
                    check(working, kind, id_, value)
                    entry = Entry(value, existing.created_index if existing else revision, revision)
                    working.entries.setdefault(kind, {})[id_] = entry
                ops.append((kind, id_, entry))
            return ops, result

        return await self._commit(change)

    # --- the write path ------------------------------------------------------------------

    async def _save(
        self,
        kind: str,
        id_: str,
        build: Callable[[Entry | None], dict[str, Any]],
        *,
        must_exist: bool = False,
        unchecked: Collection[str] = (),
    ) -> tuple[dict[str, Any], bool]:
        """Write the resource `build` makes from the current one (None: new); returns the
        stored value and whether it was created."""

        def change(state: State) -> tuple[list[Op], tuple[dict[str, Any], bool]]:
            existing = state.of(kind).get(id_)
            if must_exist and existing is None:
                raise key_not_found()
            value = dict(build(existing))
            if kind == CONSUMERS and isinstance(value.get("plugins"), dict):
                value["plugins"] = self._stored_credentials(state, id_, value["plugins"], existing)
            now = int(time.time())
            value["create_time"] = existing.value.get("create_time", now) if existing else now
            value["update_time"] = now
            check(state, kind, id_, value, unchecked)
            revision = state.revision + 1
            entry = Entry(value, existing.created_index if existing else revision, revision)
            return [(kind, id_, entry)], (value, existing is None)

        return await self._commit(change)

    def _stored_credentials(
        self, state: State, username: str, plugins: dict[str, Any], existing: Entry | None
    ) -> dict[str, Any]:
        """A consumer's plugins as stored: its secrets digested, hashed or sealed (a masked
        one keeps the stored value). A clear key-auth key is also checked against the keys
        other consumers hold as digests made by older keys (the digests' own comparison in
        `check` covers those made by the same key)."""
        previous = existing.value.get("plugins") if existing is not None else None
        try:
            stored = stored_plugins(
                username, plugins, previous if isinstance(previous, dict) else None, self.keyring
            )
        except Refused as exc:
            raise bad(f"invalid plugins configuration: {exc}") from None
        others = [
            (other, entry.value.get("plugins") or {})
            for other, entry in state.of(CONSUMERS).items()
            if other != username
        ]
        for name, conf in plugins.items():
            field = DECLARATIONS[name].credential_field if name in DECLARATIONS else None
            if field is None or not isinstance(conf, dict):
                continue
            holder = duplicate_holder(name, field, conf.get(field), others, self.keyring)
            if holder is not None:
                raise bad(f"duplicate {name} {field} found with consumer: {holder}")
        return stored

    async def commit(self, change: Callable[[State], tuple[list[Op], T]]) -> T:
        """Apply the changes `change` decides from the current configuration as one atomic
        write, deciding again if another write landed in between: for control plane features
        that change several resources at once (a tenant's consumer group and its consumers).
        `change` checks what it writes (`check`) and raises to write nothing."""
        return await self._commit(change)

    async def _commit(self, change: Callable[[State], tuple[list[Op], T]]) -> T:
        for _ in range(RETRIES):
            state = await self.store.load()
            ops, result = change(state)
            try:
                await self.store.write(state.revision, ops)
            except Conflict:
                continue  # another write landed in between: check against it
            return result
        raise Unavailable("the edge configuration is changing too fast; try again")


def check(
    state: State, kind: str, id_: str, value: dict[str, Any], unchecked: Collection[str] = ()
) -> None:
    """Everything APISIX checks before storing `value` as `kind`/`id_` in `state`."""
    if kind == ROUTES and "host" in value and "hosts" in value:
        raise bad("only one of host or hosts is allowed")
    check_resource(kind, value)
    for plugin in DECLARATIONS.values():
        problem = plugin.check_resource(kind, value)
        if problem is not None:
            raise bad(problem)
    if kind in REFERENCED:  # an update keeps the resources naming it working
        updated = _with(state.snapshot(), kind, id_, value)
        for holder, other_id, name, conf in _users(state, kind, id_):
            problem = DECLARATIONS[name].check_references(conf, updated)
            if problem is not None:
                problem = f"{SINGULAR[holder]} [{other_id}] needs it: {problem}"
                raise bad(f"invalid content: {problem}")  # protos: their one field
    plugins = value.get("plugins") or {}
    check_plugins(plugins, consumer=kind == CONSUMERS, unchecked=unchecked)
    _check_plugin_references(state, plugins)
    for field, target in REFERENCES.get(kind, ()):
        if field in value and str(value[field]) not in state.of(target):
            name = SINGULAR[target]
            raise bad(
                f"failed to fetch {name} info by {name} id [{value[field]}], response code: 404"
            )
    if kind == CONSUMERS:
        _check_unique_credentials(state, id_, plugins)
    if kind == GLOBAL_RULES:
        for other_id, other in state.of(GLOBAL_RULES).items():
            for name in plugins:
                if other_id != id_ and name in (other.value.get("plugins") or {}):
                    raise bad(f"plugin '{name}' already exists in global rule with id '{other_id}'")


def _check_plugin_references(state: State, plugins: dict[str, Any]) -> None:
    """The resources plugins name exist and fit them (grpc-transcode's proto defines its
    service, method and detail type): the data plane would refuse the whole configuration
    otherwise."""
    snapshot: Snapshot | None = None
    for name, conf in plugins.items():
        plugin = DECLARATIONS.get(name)
        if plugin is None or not plugin.references or not isinstance(conf, dict):
            continue
        snapshot = snapshot or state.snapshot()
        try:
            problem = plugin.check_references(conf, snapshot)
        except MissingReference as exc:
            what = SINGULAR[exc.kind]
            message = f"failed to fetch {what} info by {what} id [{exc.id}], response code: 404"
            raise bad(message) from None
        if problem is not None:
            raise bad(f"failed to check the configuration of plugin {name} err: {problem}")


def _with(snapshot: Snapshot, kind: str, id_: str, value: dict[str, Any]) -> Snapshot:
    """`snapshot` with `value` stored as `kind`/`id_`."""
    resources = {**snapshot.resources, kind: {**snapshot.of(kind), id_: value}}
    return Snapshot(snapshot.revision, resources)


def shown(kind: str, value: dict[str, Any]) -> dict[str, Any]:
    """A resource as the Admin API answers it: a consumer's secrets masked."""
    if kind == CONSUMERS and isinstance(value.get("plugins"), dict):
        return {**value, "plugins": shown_credentials(value["plugins"])}
    return value


def _check_unique_credentials(state: State, username: str, plugins: dict[str, Any]) -> None:
    """An auth plugin's credential (key-auth's `key`) identifies one consumer only."""
    for name, conf in plugins.items():
        field = DECLARATIONS[name].credential_field if name in DECLARATIONS else None
        if field is None or field not in conf:
            continue
        for other, entry in state.of(CONSUMERS).items():
            held = (entry.value.get("plugins") or {}).get(name) or {}
            if other != username and held.get(field) == conf[field]:
                raise bad(f"duplicate {name} {field} found with consumer: {other}")


def _first_user(state: State, kind: str, id_: str) -> tuple[str, str] | None:
    """A resource that references `kind`/`id_`, if any."""
    for holder, references in REFERENCES.items():
        for field, target in references:
            if target != kind:
                continue
            for other_id, entry in sorted(
                state.of(holder).items(), key=lambda item: item[1].created_index
            ):
                if str(entry.value.get(field, "")) == id_:
                    return holder, other_id
    for holder, other_id, _, _ in _users(state, kind, id_):
        return holder, other_id
    return None


def _users(state: State, kind: str, id_: str) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """(kind, id, plugin, conf) of each plugin configuration that names `kind`/`id_`
    (`Plugin.references`), in the order a refused delete names them."""
    for holder in PLUGIN_HOLDERS:
        for other_id, entry in sorted(
            state.of(holder).items(), key=lambda item: item[1].created_index
        ):
            for name, conf in (entry.value.get("plugins") or {}).items():
                plugin = DECLARATIONS.get(name)
                if plugin is None or not isinstance(conf, dict):
                    continue
                for field, target in plugin.references.items():
                    if target == kind and str(conf.get(field, "")) == id_:
                        yield holder, other_id, name, conf


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise NotFound(f"Unsupported resource type: {kind}")
    return kind


def _key(kind: str, id_: str) -> str:
    return f"/apisix/{kind}/{id_}"


def _item(kind: str, id_: str, entry: Entry) -> admin_pb2.ResourceItem:
    return admin_pb2.ResourceItem(
        key=_key(kind, id_),
        value=struct(shown(kind, entry.value)),
        createdIndex=entry.created_index,
        modifiedIndex=entry.modified_index,
    )


def _put_id(kind: str, path_id: str, body: dict[str, Any]) -> str:
    """The id of a PUT: the path's, or the body's (`username` for consumers); both must agree."""
    field = "username" if kind == CONSUMERS else "id"
    given = body.get(field)
    if path_id and given is not None and str(given) != path_id:
        raise bad("wrong username" if kind == CONSUMERS else f"wrong {SINGULAR[kind]} id")
    id_ = path_id or (str(given) if given is not None else "")
    if not id_:
        raise bad("missing consumer name" if kind == CONSUMERS else f"missing {SINGULAR[kind]} id")
    body[field] = id_
    return id_


def _refuse_forbidden(body: dict[str, Any]) -> None:
    for name in FORBIDDEN:
        if name in body:
            raise bad(f"the property is forbidden:  {name}")


def _set_path(value: dict[str, Any], steps: list[str], new: Any) -> None:
    """Replace the value at `steps` (APISIX's sub-path PATCH)."""
    for step in steps[:-1]:
        nested = value.get(step)
        if not isinstance(nested, dict):
            raise bad(f"invalid sub path: {'/'.join(steps)}")
        value = nested
    if new is None:
        value.pop(steps[-1], None)
    else:
        value[steps[-1]] = new


def _pattern(request: admin_pb2.ListResourcesRequest, field: str) -> re.Pattern[str] | None:
    """The `name` or `uri` list filter, a regular expression as in APISIX; 400 when it is not
    one (an unbalanced `[` was a 500)."""
    if not request.HasField(field):
        return None
    try:
        return re.compile(getattr(request, field))
    except re.error as err:
        raise InvalidRequest(f"invalid {field} filter: not a regular expression ({err})") from None


def _matches(
    request: admin_pb2.ListResourcesRequest,
    name: re.Pattern[str] | None,
    uri: re.Pattern[str] | None,
    value: dict[str, Any],
) -> bool:
    """APISIX's v3 list filters (`name` and `uri` compiled by `_pattern`)."""
    if name is not None and not name.search(str(value.get("name", ""))):
        return False
    if request.HasField("label"):
        key, _, wanted = request.label.partition(":")
        labels = value.get("labels") or {}
        if key not in labels or (wanted and labels[key] != wanted):
            return False
    if uri is not None:
        uris = [value["uri"]] if "uri" in value else list(value.get("uris") or [])
        if not any(uri.search(u) for u in uris):
            return False
    if request.HasField("filter"):
        field, _, wanted = request.filter.partition("=")
        if str(value.get(field, "")) != wanted:
            return False
    return True


def _subsystem(subsystem: str) -> None:
    if subsystem not in ("", "http", "stream"):
        raise InvalidRequest(f"unsupported subsystem: {subsystem}")
