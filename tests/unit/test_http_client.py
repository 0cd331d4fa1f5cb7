"""runtime/http1/client.py, the lean HTTP/1.1 client of the AI gateway's provider calls, against
real servers on loopback: keep-alive reuse, the stale-connection retry, both timeouts, a cut
body, TLS with SNI, backpressure on a large body, and the outbound guard on new connections."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from shared_kit import running, self_signed

from runtime.http1.client import ClientError, HttpClient
from runtime.outbound import guarded_resolve

Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _echo(request: web.Request) -> web.Response:
    body = await request.read()
    return web.json_response(
        {
            "method": request.method,
            "path": request.path_qs,
            "host": request.headers.get("Host"),
            "user_agent": request.headers.get("User-Agent"),
            "trace": request.headers.get("traceparent"),
            "body": body.decode(),
        }
    )


async def _big(request: web.Request) -> web.Response:
    return web.Response(body=b"x" * (2 * 1024 * 1024 + 7))


def _app() -> web.Application:
    app = web.Application()
    app.router.add_route("*", "/echo", _echo)
    app.router.add_get("/big", _big)
    return app


@pytest.fixture
async def client() -> AsyncIterator[HttpClient]:
    http = HttpClient()
    yield http
    http.close()


async def _raw_server(serve: Serve) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


async def _read_request(reader: asyncio.StreamReader) -> bool:
    """One request's head (these tests send no body to raw servers); False at EOF."""
    try:
        await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return False
    return True


async def test_request_and_keep_alive(client: HttpClient) -> None:
    async with running(_app()) as base:
        for n in range(3):
            resp = await client.request(
                "POST", f"{base}/echo?n={n}", {"traceparent": "00-ab-cd-01"}, b"hello",
                idle_secs=5,
            )  # fmt: skip
            assert resp.status == 200
            assert resp.headers["content-type"].startswith("application/json")
            answer = (await resp.read()).decode()
            resp.close()
            assert f'"path": "/echo?n={n}"' in answer
            assert '"body": "hello"' in answer and '"trace": "00-ab-cd-01"' in answer
            assert f'"host": "{base.removeprefix("http://")}"' in answer
            assert '"user_agent": "strata"' in answer
        # One connection served the three requests.
        assert sum(p.opened for p in client._pools.values()) == 1


async def test_a_stale_keep_alive_connection_is_retried_once(client: HttpClient) -> None:
    """The server answers the first request of each connection and closes the connection on
    the second without a word, as a server does when its keep-alive timer ran out."""
    connections = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        if await _read_request(reader):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            await writer.drain()
        await _read_request(reader)
        writer.close()

    server, base = await _raw_server(serve)
    async with server:
        for _ in range(2):
            resp = await client.request("GET", f"{base}/", {}, idle_secs=5)
            assert (resp.status, await resp.read()) == (200, b"ok")
            resp.close()
        assert connections == 2


async def test_silence_on_a_kept_alive_connection_is_not_sent_again(client: HttpClient) -> None:
    """Only a connection the server closed is retried: a server that keeps it open and says
    nothing has the request, which must not run twice."""
    connections, requests = 0, 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections, requests
        connections += 1
        while await _read_request(reader):
            requests += 1
            if requests == 1:
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                await writer.drain()
        writer.close()

    server, base = await _raw_server(serve)
    async with server:
        resp = await client.request("GET", f"{base}/", {}, idle_secs=5)
        assert await resp.read() == b"ok"
        resp.close()
        with pytest.raises(ClientError) as caught:
            await client.request("GET", f"{base}/", {}, idle_secs=0.3)
        assert caught.value.timeout
    assert (connections, requests) == (1, 2)


async def test_silence_past_the_idle_limit_is_a_timeout(client: HttpClient) -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
        await writer.drain()
        await asyncio.sleep(5)
        writer.close()

    server, base = await _raw_server(serve)
    async with server:
        resp = await client.request("GET", f"{base}/", {}, idle_secs=0.3)
        with pytest.raises(ClientError) as caught:
            await resp.read()
        assert caught.value.timeout


async def test_a_trickle_past_the_total_limit_is_a_timeout(client: HttpClient) -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for _ in range(50):
            writer.write(b"1\r\nx\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
        writer.close()

    server, base = await _raw_server(serve)
    async with server:
        resp = await client.request("GET", f"{base}/", {}, idle_secs=1, total_secs=0.4)
        with pytest.raises(ClientError) as caught:
            await resp.read()
        assert caught.value.timeout


async def test_a_body_cut_short_is_broken(client: HttpClient) -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n0123456789")
        await writer.drain()
        writer.close()

    server, base = await _raw_server(serve)
    async with server:
        resp = await client.request("GET", f"{base}/", {}, idle_secs=5)
        with pytest.raises(ClientError) as caught:
            await resp.read()
        assert caught.value.broken and not caught.value.timeout


async def test_nothing_listening_is_an_error_without_an_answer(client: HttpClient) -> None:
    server, base = await _raw_server(lambda r, w: asyncio.sleep(0))
    server.close()
    await server.wait_closed()
    with pytest.raises(ClientError) as caught:
        await client.request("GET", f"{base}/", {}, idle_secs=2)
    assert not caught.value.broken and "connect failed" in str(caught.value)


async def test_a_header_with_a_line_break_is_refused(client: HttpClient) -> None:
    with pytest.raises(ClientError, match="line break"):
        await client.request(
            "GET", "http://127.0.0.1:9/", {"x-a": "1\r\nx-injected: 1"}, idle_secs=1
        )


async def test_a_large_body_arrives_whole(client: HttpClient) -> None:
    async with running(_app()) as base:
        resp = await client.request("GET", f"{base}/big", {}, idle_secs=5)
        chunks = [c async for c in resp.iter_chunks()]
        resp.close()
    assert sum(map(len, chunks)) == 2 * 1024 * 1024 + 7 and len(chunks) > 1


async def test_https_checks_the_certificate_against_the_host(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path, "localhost")
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    runner = web.AppRunner(_app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_tls)
    await site.start()
    port = runner.addresses[0][1]
    trusting = HttpClient(tls=ssl.create_default_context(cafile=str(cert)))
    untrusting = HttpClient()
    try:
        resp = await trusting.request("GET", f"https://localhost:{port}/echo", {}, idle_secs=5)
        assert resp.status == 200
        assert f'"host": "localhost:{port}"' in (await resp.read()).decode()
        resp.close()
        with pytest.raises(ClientError, match="TLS handshake failed"):
            await untrusting.request("GET", f"https://localhost:{port}/echo", {}, idle_secs=5)
    finally:
        trusting.close()
        untrusting.close()
        await runner.cleanup()


async def test_new_connections_pass_the_outbound_guard() -> None:
    strict = HttpClient(resolve=guarded_resolve(development=False))
    relaxed = HttpClient(resolve=guarded_resolve(development=True))
    try:
        with pytest.raises(ClientError, match="metadata"):
            await relaxed.request("GET", "http://169.254.169.254/latest/", {}, idle_secs=2)
        with pytest.raises(ClientError, match="metadata host"):
            await relaxed.request("GET", "http://metadata.google.internal/", {}, idle_secs=2)
        async with running(_app()) as base:
            with pytest.raises(ClientError, match="loopback"):
                await strict.request("GET", f"{base}/echo", {}, idle_secs=2)
            resp = await relaxed.request("GET", f"{base}/echo", {}, idle_secs=2)
            assert resp.status == 200
            resp.close()
    finally:
        strict.close()
        relaxed.close()
