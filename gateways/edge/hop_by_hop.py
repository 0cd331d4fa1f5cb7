"""Headers a proxy does not pass on as received: hop-by-hop ones (RFC 9110 §7.6.1), framing,
and what the edge sets itself. Shared by the proxy and the plugins that call upstreams."""

# Not forwarded as received (RFC 9110 §7.6.1 hop-by-hop), and what we set ourselves.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "expect",
        "x-forwarded-for",
        "x-forwarded-proto",
        "x-forwarded-host",
        "x-forwarded-port",
        "x-real-ip",
    }
)
RESPONSE_SKIP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "trailer", "upgrade"}
)
