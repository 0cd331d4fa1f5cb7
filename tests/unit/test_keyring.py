"""The platform keyring (runtime/keyring.py): sealing bound to a record, digests, rotation
(the newest key seals, older ones still open), and STRATA_DATA_KEYS's checks, which never
repeat key material."""

from __future__ import annotations

import base64

import pytest

from controlplane.config import ControlPlaneConfig
from runtime.config import ConfigError
from runtime.keyring import (
    MASTER_KID,
    Keyring,
    SealError,
    is_digest,
    is_sealed,
    keyring_of,
    kid_of,
    new_key,
    parse_keys,
)

K1, K2 = new_key("k1"), new_key("k2")


def ring(*entries: str, master: str = "mk") -> Keyring:
    return Keyring(parse_keys(",".join(entries)) if entries else [], master)


def test_seal_opens_only_for_its_record_and_never_holds_the_plaintext() -> None:
    keys = ring(K1)
    sealed = keys.seal("hunter2-secret", "settings:pagerduty_key")
    assert is_sealed(sealed) and kid_of(sealed) == "k1" and "hunter2" not in sealed
    assert keys.open(sealed, "settings:pagerduty_key") == "hunter2-secret"
    with pytest.raises(SealError):
        keys.open(sealed, "settings:email_smtp")  # copied onto another record
    assert keys.seal("x", "c") != keys.seal("x", "c")  # a fresh nonce each time
    tampered = sealed[:-2] + ("A" if sealed[-2] != "A" else "B") + sealed[-1]
    with pytest.raises(SealError):
        keys.open(tampered, "settings:pagerduty_key")


def test_rotation_old_keys_open_the_newest_seals_and_protect_reseals() -> None:
    old = ring(K1)
    sealed_k1 = old.seal("provider-key", "p:openai")
    rotated = ring(K2, K1)
    assert rotated.newest == "k2" and rotated.kids == ("k2", "k1", MASTER_KID)
    assert rotated.open(sealed_k1, "p:openai") == "provider-key"
    assert kid_of(rotated.seal("v", "c")) == "k2"
    assert rotated.stale(sealed_k1) and rotated.stale("clear text")
    again = rotated.protect(sealed_k1, "p:openai")
    assert kid_of(again) == "k2" and rotated.open(again, "p:openai") == "provider-key"
    assert not rotated.stale(again) and rotated.protect(again, "p:openai") == again
    # a key taken out of the list no longer opens what it sealed
    with pytest.raises(SealError, match="no longer lists"):
        ring(K2).open(sealed_k1, "p:openai")


def test_master_key_fallback_and_what_it_sealed_still_opens_once_keys_are_configured() -> None:
    bare = ring(master="the-master-key")
    assert bare.newest == MASTER_KID
    sealed = bare.seal("s", "c")
    configured = ring(K1, master="the-master-key")
    assert configured.newest == "k1" and configured.open(sealed, "c") == "s"
    with pytest.raises(SealError):
        ring(K1, master="another-master-key").open(sealed, "c")


def test_digests_match_under_their_own_key_only() -> None:
    old = ring(K1)
    digest = old.digest("sk-abc")
    assert is_digest(digest) and kid_of(digest) == "k1" and "sk-abc" not in digest
    assert old.digest("sk-abc") == digest  # deterministic: a lookup key
    rotated = ring(K2, K1)
    assert rotated.matches(digest, "sk-abc") and not rotated.matches(digest, "sk-abd")
    assert kid_of(rotated.digest("sk-abc")) == "k2"
    assert digest in rotated.digests("sk-abc", ["k2", "k1", "gone"])
    assert not ring(K2).matches(digest, "sk-abc")


def test_clear_values_are_revealed_as_stored_until_sealed() -> None:
    keys = ring(K1)
    assert keys.reveal("legacy-clear", "c") == "legacy-clear"
    assert keys.reveal(keys.seal("s", "c"), "c") == "s"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("k1", "entry 1 must be `kid:base64key`"),
        ("k 1:" + K1.split(":")[1], "entry 1 must be"),
        (f"{K1},{K1}", "kid `k1` is listed twice"),
        ("master:" + K1.split(":")[1], "reserved"),
        ("k1:not base64!", "key `k1` is not base64"),
        ("k1:" + base64.b64encode(b"short").decode(), "must be 32 bytes, got 5"),
    ],
)
def test_bad_data_keys_are_refused_without_repeating_the_key(value: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ControlPlaneConfig.from_env({"MASTER_KEY": "m", "STRATA_DATA_KEYS": value})
    assert message in str(caught.value)
    for part in value.replace(",", ":").split(":")[1:]:
        if len(part) > 8:
            assert part not in str(caught.value)


def test_a_service_config_builds_its_keyring() -> None:
    config = ControlPlaneConfig.from_env({"MASTER_KEY": "m", "STRATA_DATA_KEYS": f"{K2},{K1}"})
    keys = keyring_of(config)
    assert keys.newest == "k2" and keyring_of(config) is keys
    unset = keyring_of(ControlPlaneConfig.from_env({"MASTER_KEY": "m"}))
    assert unset.newest == MASTER_KID
