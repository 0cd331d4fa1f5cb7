"""JSON rule table of the edge proxy's admin API (port 9180, APISIX admin API v3 shape).

Only the admin API is a rule table; the data plane on :9080 is the proxy pipeline.

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

from runtime.http_rules import HttpRule

PKG = "strata.edge.v1"
PREFIX = "/apisix/admin"

_ADMIN = f"{PKG}.EdgeAdminService"

HTTP_RULES: tuple[HttpRule, ...] = (
    # routes
    HttpRule("GET", f"{PREFIX}/routes", f"{_ADMIN}/ListRoutes", body=None),
    HttpRule("GET", f"{PREFIX}/routes/{{id}}", f"{_ADMIN}/GetRoute", body=None),
    HttpRule("PUT", f"{PREFIX}/routes/{{id}}", f"{_ADMIN}/PutRoute", body="route"),
    HttpRule("POST", f"{PREFIX}/routes", f"{_ADMIN}/CreateRoute", status=201, body="route"),
    HttpRule("PATCH", f"{PREFIX}/routes/{{id}}", f"{_ADMIN}/PatchRoute", body="patch"),
    HttpRule("DELETE", f"{PREFIX}/routes/{{id}}", f"{_ADMIN}/DeleteRoute", body=None),
    # upstreams
    HttpRule("GET", f"{PREFIX}/upstreams", f"{_ADMIN}/ListUpstreams", body=None),
    HttpRule("GET", f"{PREFIX}/upstreams/{{id}}", f"{_ADMIN}/GetUpstream", body=None),
    HttpRule("PUT", f"{PREFIX}/upstreams/{{id}}", f"{_ADMIN}/PutUpstream", body="upstream"),
    HttpRule(
        "POST", f"{PREFIX}/upstreams", f"{_ADMIN}/CreateUpstream", status=201, body="upstream"
    ),
    HttpRule("PATCH", f"{PREFIX}/upstreams/{{id}}", f"{_ADMIN}/PatchUpstream", body="patch"),
    HttpRule("DELETE", f"{PREFIX}/upstreams/{{id}}", f"{_ADMIN}/DeleteUpstream", body=None),
    # consumers
    HttpRule("GET", f"{PREFIX}/consumers", f"{_ADMIN}/ListConsumers", body=None),
    HttpRule("GET", f"{PREFIX}/consumers/{{username}}", f"{_ADMIN}/GetConsumer", body=None),
    HttpRule("PUT", f"{PREFIX}/consumers", f"{_ADMIN}/PutConsumer", body="consumer"),
    HttpRule("PUT", f"{PREFIX}/consumers/{{username}}", f"{_ADMIN}/PutConsumer", body="consumer"),
    HttpRule("DELETE", f"{PREFIX}/consumers/{{username}}", f"{_ADMIN}/DeleteConsumer", body=None),
    # consumer groups
    HttpRule("GET", f"{PREFIX}/consumer_groups", f"{_ADMIN}/ListConsumerGroups", body=None),
    HttpRule("GET", f"{PREFIX}/consumer_groups/{{id}}", f"{_ADMIN}/GetConsumerGroup", body=None),
    HttpRule(
        "PUT",
        f"{PREFIX}/consumer_groups/{{id}}",
        f"{_ADMIN}/PutConsumerGroup",
        body="consumer_group",
    ),
    HttpRule(
        "DELETE", f"{PREFIX}/consumer_groups/{{id}}", f"{_ADMIN}/DeleteConsumerGroup", body=None
    ),
    # plugins (the list answer is a bare JSON array)
    HttpRule(
        "GET",
        f"{PREFIX}/plugins/list",
        f"{_ADMIN}/ListPlugins",
        body=None,
        response_body="plugins",
    ),
    HttpRule(
        "GET",
        f"{PREFIX}/schema/plugins/{{name}}",
        f"{_ADMIN}/GetPluginSchema",
        body=None,
        response_body="schema",
    ),
)
