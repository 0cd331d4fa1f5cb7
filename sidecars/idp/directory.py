"""The IdP's in-memory directory of users, clients and organizations, and its persistence.

The users file is the baseline; run-time changes made through the admin API (and clients that
registered themselves, RFC 7591) are kept apart and written to the state file, so the file
stays the readable source of the dev accounts while additions and deletions survive restarts.
On load, state is merged over the file: added records win over file records with the same key,
and deleted file records stay deleted. The outstanding authorization codes and refresh tokens
(`grants.py`) are written to the same file.

Thread-safety: mutations run on the event loop only; `authenticate_*` only reads and may run in a
worker thread (hashing is slow).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

from runtime.hashing import hash_secret, verify_secret
from sidecars.idp.grants import Grants
from sidecars.idp.records import (
    Client,
    Organization,
    User,
    client_from_state,
    derived_id,
    organization_from_state,
    parse_client,
    parse_organization,
    parse_user,
    to_state,
    user_from_state,
)

T = TypeVar("T", User, Client, Organization)


class Conflict(Exception):
    """A record with the same key already exists."""


class Collection(Generic[T]):
    """Records of one kind keyed by a name, tracking what differs from the users file."""

    def __init__(self) -> None:
        self._items: dict[str, T] = {}
        self._from_file: set[str] = set()
        self._added: dict[str, T] = {}
        self._deleted: set[str] = set()

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._items.values()))

    def get(self, key: str) -> T | None:
        """The record stored under `key`, if any."""
        return self._items.get(key)

    def seed(self, key: str, item: T) -> None:
        """Add a record from the users file."""
        if key in self._items:
            raise ValueError(f"duplicate {key!r}")
        self._items[key] = item
        self._from_file.add(key)

    def restore(self, added: dict[str, T], deleted: list[str]) -> None:
        """Apply saved run-time changes over the seeded records."""
        self._deleted = {key for key in deleted if key in self._from_file}
        for key in self._deleted:
            self._items.pop(key, None)
        self._added = dict(added)
        self._items.update(added)

    def add(self, key: str, item: T) -> None:
        """Add a run-time record; raises `Conflict` when the key is taken."""
        if key in self._items:
            raise Conflict(key)
        self._items[key] = item
        self._added[key] = item
        self._deleted.discard(key)

    def remove(self, key: str) -> T:
        """Remove a record (file or run-time); raises `KeyError` when absent."""
        item = self._items.pop(key)
        self._added.pop(key, None)
        if key in self._from_file:
            self._deleted.add(key)
        return item

    def state(self) -> tuple[list[dict[str, Any]], list[str]]:
        """The run-time additions and deletions, as written to the state file."""
        return [to_state(item) for item in self._added.values()], sorted(self._deleted)


def _entries(doc: dict[str, Any], kind: str, source: Path) -> list[dict[str, Any]]:
    entries = doc.get(kind, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError(f"{source}: '{kind}' must be a list of objects")
    return entries


class Directory:
    """Users by username, clients by client_id, organizations by id."""

    def __init__(self, state_file: Path | None = None) -> None:
        self.users: Collection[User] = Collection()
        self.clients: Collection[Client] = Collection()
        self.organizations: Collection[Organization] = Collection()
        self.grants = Grants()
        self._state_file = state_file
        # Compared against when the username or client is unknown, so a miss costs as much
        # time as a wrong password and does not reveal which accounts exist.
        self._dummy_hash = hash_secret("not-a-real-secret")

    @classmethod
    def load(cls, users_file: Path, state_file: Path | None) -> Directory:
        """Build from the users file, then merge the state file when it exists.

        Raises `ValueError` (naming the file and record) on malformed input, and `OSError` when
        the users file cannot be read.
        """
        directory = cls(state_file)
        doc = json.loads(users_file.read_text(encoding="utf-8"))
        for kind, parse, key in (
            ("users", lambda d: parse_user(d, lambda name: derived_id("user", name)), "username"),
            ("clients", parse_client, "client_id"),
            ("organizations", parse_organization, "id"),
        ):
            collection: Collection[Any] = getattr(directory, kind)
            for index, entry in enumerate(_entries(doc, kind, users_file)):
                try:
                    record = parse(entry)
                    collection.seed(getattr(record, key), record)
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"{users_file}: {kind}[{index}]: {exc}") from exc
        if state_file is not None and state_file.exists():
            directory._restore(state_file)
        return directory

    def _restore(self, state_file: Path) -> None:
        doc = json.loads(state_file.read_text(encoding="utf-8"))
        deleted = doc.get("deleted", {})
        rebuilders: tuple[tuple[str, Callable[[dict[str, Any]], Any], str], ...] = (
            ("users", user_from_state, "username"),
            ("clients", client_from_state, "client_id"),
            ("organizations", organization_from_state, "id"),
        )
        for kind, rebuild, key in rebuilders:
            try:
                records = [rebuild(entry) for entry in _entries(doc, kind, state_file)]
            except TypeError as exc:
                raise ValueError(f"{state_file}: {kind}: {exc}") from exc
            collection: Collection[Any] = getattr(self, kind)
            collection.restore({getattr(r, key): r for r in records}, deleted.get(kind, []))
        try:
            self.grants.restore(_entries(doc, "grants", state_file))
        except TypeError as exc:
            raise ValueError(f"{state_file}: grants: {exc}") from exc

    def save(self) -> None:
        """Write run-time changes to the state file atomically (temp file, fsync, rename)."""
        if self._state_file is None:
            return
        doc: dict[str, Any] = {"version": 1, "deleted": {}}
        for kind in ("users", "clients", "organizations"):
            added, deleted = getattr(self, kind).state()
            doc[kind] = added
            doc["deleted"][kind] = deleted
        doc["grants"] = self.grants.state()
        self._state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._state_file.with_suffix(".tmp")
        # The file holds hashes, not secrets, but there is no reason for others to read it.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(doc, out, indent=2, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self._state_file)

    def find_user(self, ref: str) -> User | None:
        """A user by id (Keycloak's admin paths use ids) or, for convenience, by username."""
        return self.users.get(ref) or next((u for u in self.users if u.id == ref), None)

    def authenticate_user(self, username: str, password: str) -> User | None:
        """The user when the password matches, else None. Slow (scrypt): run in a thread."""
        user = self.users.get(username)
        ok = verify_secret(password, user.password_hash if user else self._dummy_hash)
        return user if ok and user is not None else None

    def authenticate_client(self, client_id: str, secret: str | None) -> Client | None:
        """The client when it exists and, if confidential, the secret matches; else None.

        A public client authenticates by id alone (RFC 6749 §2.1); a secret sent along with it
        is ignored, as Keycloak does. Slow for confidential clients: run in a thread.
        """
        client = self.clients.get(client_id)
        if client is not None and not client.confidential:
            return client
        if secret is None:
            return None
        encoded = client.secret_hash if client and client.secret_hash else self._dummy_hash
        ok = verify_secret(secret, encoded)
        return client if ok and client is not None else None
