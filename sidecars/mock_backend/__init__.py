"""The spec's mock backend: the upstream of the edge routes `/smoke/*` and `/api/*`.

It answers every request with a JSON description of what it received (method, path, query,
headers without credentials, body, tenant), so edge tests can see exactly what the proxy
forwarded. `/status/{code}` and `/delay/{ms}` exercise the proxy's error and timeout paths.
"""
