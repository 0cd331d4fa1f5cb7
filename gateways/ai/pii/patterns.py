"""The entities a pattern finds: e-mail, SSN, credit card (Luhn-checked), phone."""

from __future__ import annotations

import re

import phonenumbers

from gateways.ai.pii.spans import Found

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
# Area 000, 666 and 9xx, group 00 and serial 0000 are never issued.
SSN = re.compile(r"\b(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}\b")
CARD = re.compile(r"\b\d(?:[ -]?\d){12,18}\b")
# Enough digits to be a phone number at all: the matcher below is the costly step.
SEVEN_DIGITS = re.compile(r"(?:\d\D{0,3}){7}")


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def find_emails(text: str) -> list[Found]:
    return [Found(m.start(), m.end(), "EMAIL") for m in EMAIL.finditer(text)]


def find_ssns(text: str) -> list[Found]:
    return [Found(m.start(), m.end(), "SSN") for m in SSN.finditer(text)]


def find_cards(text: str) -> list[Found]:
    found = []
    for m in CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            found.append(Found(m.start(), m.end(), "CREDIT_CARD"))
    return found


# National formats read for these regions, in order; any number written with "+" is read too.
REGIONS = ("US", "GB")
VALID = phonenumbers.Leniency.VALID
POSSIBLE = phonenumbers.Leniency.POSSIBLE


# A North American number written with separators, `(555) 123-4567` or `555.123.4567`: the
# layout says "phone" even where the metadata calls the block unassigned (555 numbers, new
# area codes), which VALID alone would let through.
NANP_WRITTEN = re.compile(
    r"(?<![\w+-])(?:\+?1[-. ])?(?:\([2-9]\d{2}\) ?|[2-9]\d{2}[-. ])\d{3}[-. ]\d{4}(?![\w-])"
)


def find_phones(text: str) -> list[Found]:
    """Numbers in US or UK national format that libphonenumber's metadata calls valid, and any
    international number written with `+` and a plausible length for its country (a real
    number's block may be newer than the metadata, so "+" numbers are not held to VALID)."""
    if not SEVEN_DIGITS.search(text):
        return []
    found = []
    for region in REGIONS:
        found += [
            Found(m.start, m.end, "PHONE")
            for m in phonenumbers.PhoneNumberMatcher(text, region, leniency=VALID)
        ]
    found += [Found(m.start(), m.end(), "PHONE") for m in NANP_WRITTEN.finditer(text)]
    if "+" in text:
        found += [
            Found(m.start, m.end, "PHONE")
            for m in phonenumbers.PhoneNumberMatcher(text, "ZZ", leniency=POSSIBLE)
        ]
    return found
