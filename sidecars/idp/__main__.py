"""Run the dev IdP: `python -m sidecars.idp [--host H] [--port P] [--issuer URL] ...`."""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import sys
from pathlib import Path

from sidecars.httpkit import serve
from sidecars.idp.app import build_app
from sidecars.idp.config import DEFAULT_ISSUER, DEFAULT_USERS_FILE, IdpConfig
from sidecars.jsonlog import configure_logging

M_MMAP_THRESHOLD = -3  # <malloc.h>
MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's default, kept fixed


def parse_args() -> argparse.Namespace:
    env = os.environ
    parser = argparse.ArgumentParser(prog="python -m sidecars.idp", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--issuer", default=env.get("IDP_ISSUER", DEFAULT_ISSUER))
    parser.add_argument("--data-dir", type=Path, default=Path(env.get("IDP_DATA_DIR", "data/idp")))
    parser.add_argument("--users-file", type=Path, default=DEFAULT_USERS_FILE)
    parser.add_argument("--token-ttl", type=int, default=300, help="token lifetime, seconds")
    parser.add_argument(
        "--code-ttl", type=int, default=60, help="authorization code lifetime, seconds"
    )
    parser.add_argument(
        "--refresh-ttl", type=int, default=1800, help="refresh token lifetime, seconds"
    )
    # The default token is for the local dev stack only; set IDP_ADMIN_TOKEN anywhere else.
    parser.add_argument("--admin-token", default=env.get("IDP_ADMIN_TOKEN", "dev-idp-admin"))
    parser.add_argument("--log-level", default=env.get("LOG_LEVEL", "INFO"))
    parser.add_argument(
        "--realm",
        action="append",
        default=[r for r in env.get("IDP_REALMS", "").split(",") if r],
        metavar="NAME=USERS_FILE",
        help="another realm, served under /realms/NAME with its own issuer and keys "
        "(repeatable; IDP_REALMS: comma-separated)",
    )
    return parser.parse_args()


def realms(specs: list[str]) -> dict[str, Path]:
    """`NAME=USERS_FILE` pairs as a mapping; SystemExit naming a malformed one."""
    found: dict[str, Path] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"--realm {spec!r}: expected NAME=USERS_FILE")
        found[name] = Path(path)
    return found


def keep_heap_small() -> None:
    """Each password or client-secret hash (scrypt, `runtime/hashing.py`) takes a 16 MB buffer.
    glibc's malloc raises its mmap threshold to the size of a mapped block once freed, so from
    the second hash on that buffer came from the heap and stayed resident (about 20 MB the IdP
    held idle after hashing its users at start). A fixed threshold keeps such buffers mapped,
    and each is given back as it is freed. Linux with glibc only; elsewhere nothing changes."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    except (OSError, AttributeError):
        pass  # not glibc


def main() -> None:
    keep_heap_small()
    args = parse_args()
    configure_logging(args.log_level)
    config = IdpConfig(
        issuer=args.issuer.rstrip("/"),
        data_dir=args.data_dir,
        users_file=args.users_file,
        admin_token=args.admin_token,
        token_ttl=args.token_ttl,
        code_ttl=args.code_ttl,
        refresh_ttl=args.refresh_ttl,
    )
    asyncio.run(serve(build_app(config, realms(args.realm)), args.host, args.port))


if __name__ == "__main__":
    main()
