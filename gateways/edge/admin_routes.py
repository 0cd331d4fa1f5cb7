"""JSON route table of the edge proxy's admin API (port 9180, APISIX admin API v3 shape).

Only the admin API is a route table; the data plane on :9080 is the proxy pipeline.

Bodies of writes are whole resource objects: PUT/POST bind the JSON body to the request's
resource field (`route`, `upstream`, `consumer`, `consumer_group`); PATCH binds it to a `patch`
Struct so JSON merge-patch `null`s survive. Answers are APISIX envelopes (see admin.proto).

Still owed by the admin front door, not expressible in this table:
- the CIDR allow-list (403) and `X-API-KEY` check (401), header `X-API-VERSION: v3`;
- PUT answers 201 for a new object and 200 for a replaced one (table says 200);
- APISIX omits unset fields instead of printing null: these routes need a renderer that skips
  unset presence fields (resource scalars are `optional` for that reason).

`PUT /apisix/admin/consumers` (username in the body) is the form the control plane uses on key
approval; it shares `PutConsumer` with the by-path form.
"""

from __future__ import annotations

from runtime.routes import Route

PKG = "strata.edge.v1"
PREFIX = "/apisix/admin"

_ADMIN = f"{PKG}.EdgeAdminService"

ROUTES: tuple[Route, ...] = (
    # routes
    Route("GET", f"{PREFIX}/routes", f"{_ADMIN}/ListRoutes", body=None),
    Route("GET", f"{PREFIX}/routes/{{id}}", f"{_ADMIN}/GetRoute", body=None),
    Route("PUT", f"{PREFIX}/routes/{{id}}", f"{_ADMIN}/PutRoute", body="route"),
    Route("POST", f"{PREFIX}/routes", f"{_ADMIN}/CreateRoute", status=201, body="route"),
    Route("PATCH", f"{PREFIX}/routes/{{id}}", f"{_ADMIN}/PatchRoute", body="patch"),
    Route("DELETE", f"{PREFIX}/routes/{{id}}", f"{_ADMIN}/DeleteRoute", body=None),
    # upstreams
    Route("GET", f"{PREFIX}/upstreams", f"{_ADMIN}/ListUpstreams", body=None),
    Route("GET", f"{PREFIX}/upstreams/{{id}}", f"{_ADMIN}/GetUpstream", body=None),
    Route("PUT", f"{PREFIX}/upstreams/{{id}}", f"{_ADMIN}/PutUpstream", body="upstream"),
    Route("POST", f"{PREFIX}/upstreams", f"{_ADMIN}/CreateUpstream", status=201, body="upstream"),
    Route("PATCH", f"{PREFIX}/upstreams/{{id}}", f"{_ADMIN}/PatchUpstream", body="patch"),
    Route("DELETE", f"{PREFIX}/upstreams/{{id}}", f"{_ADMIN}/DeleteUpstream", body=None),
    # consumers
    Route("GET", f"{PREFIX}/consumers", f"{_ADMIN}/ListConsumers", body=None),
    Route("GET", f"{PREFIX}/consumers/{{username}}", f"{_ADMIN}/GetConsumer", body=None),
    Route("PUT", f"{PREFIX}/consumers", f"{_ADMIN}/PutConsumer", body="consumer"),
    Route("PUT", f"{PREFIX}/consumers/{{username}}", f"{_ADMIN}/PutConsumer", body="consumer"),
    Route("DELETE", f"{PREFIX}/consumers/{{username}}", f"{_ADMIN}/DeleteConsumer", body=None),
    # consumer groups
    Route("GET", f"{PREFIX}/consumer_groups", f"{_ADMIN}/ListConsumerGroups", body=None),
    Route("GET", f"{PREFIX}/consumer_groups/{{id}}", f"{_ADMIN}/GetConsumerGroup", body=None),
    Route(
        "PUT",
        f"{PREFIX}/consumer_groups/{{id}}",
        f"{_ADMIN}/PutConsumerGroup",
        body="consumer_group",
    ),
    Route("DELETE", f"{PREFIX}/consumer_groups/{{id}}", f"{_ADMIN}/DeleteConsumerGroup", body=None),
    # plugins (the list answer is a bare JSON array)
    Route(
        "GET",
        f"{PREFIX}/plugins/list",
        f"{_ADMIN}/ListPlugins",
        body=None,
        response_body="plugins",
    ),
    Route(
        "GET",
        f"{PREFIX}/schema/plugins/{{name}}",
        f"{_ADMIN}/GetPluginSchema",
        body=None,
        response_body="schema",
    ),
)
