"""The entities a pattern finds: e-mail, SSN, credit card (Luhn-checked), phone."""

from __future__ import annotations

import re

import phonenumbers

from gateways.ai.pii.spans import Found

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
# Area 000, 666 and 9xx, group 00 and serial 0000 are never issued.
SSN = re.compile(r"\b(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}\b")
CARD = re.compile(r"\b\d(?:[ -]?\d){11,18}\b")
# Maestro issues 12-digit cards: 12 digits that pass Luhn are a card only after the word.
CARD_CUE = re.compile(r"\bcard\b[^.;!?\d]{0,20}$", re.IGNORECASE)
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
        cued = len(digits) == 12 and CARD_CUE.search(text, 0, m.start())
        if (13 <= len(digits) <= 19 or cued) and luhn_valid(digits):
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


# A number written the way phone numbers are across the world's numbering plans (ITU-T E.164
# national formats): digit groups joined by one space, dash, dot or slash, an area code in
# brackets, an international prefix ("+", "00"), an extension. libphonenumber validates a
# national number only for a region it is told, so these are read by their layout instead.
WRITTEN_PHONE = re.compile(
    r"(?<![\w+#/.,-])(?:\+|00)?(?:\(\d{1,5}\)[-/ ]?)?\d{1,12}(?:(?:[-./]| - |/ | )\d{1,12}){0,5}"
    r"(?:\s?(?:x|ext\.?)\s?\d{1,5})?(?![\w/-]|[.,]\d)"
)
# Words that say a phone number follows (within the clause before it).
PHONE_CUE = re.compile(
    r"\b(?:call|called|calling|phone|tel|telephone|mobile|cell|mob|reach|text|sms|whatsapp"
    r"|ring|dial|fax|contact|hotline|landline|number|on)\b",
    re.IGNORECASE,
)
# Words that say it is some other number.
NOT_A_PHONE = re.compile(
    r"\b(?:order|ticket|invoice|ref|reference|tracking|parcel|barcode|isbn|ean|account|acct"
    r"|iban|id|room|flight|booking|case|build|version|release|serial|sku|item|policy|batch"
    r"|card|code|pin|postcode|zip|km|page|year|amount|total|price|no)\b|[#€$£¥]",
    re.IGNORECASE,
)
CLAUSE_END = re.compile(r"[.;!?]\s|\n|\band\b|\bwith\b")
DATE_OR_ADDRESS = re.compile(
    r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4}|(?:\d{1,3}\.){3}\d{1,3}"
)


def find_written_phones(text: str) -> list[Found]:
    """A phone number in any national layout: 7 to 15 digits that start with a trunk or
    international prefix ("0", "+", "00", a bracketed area code), or follow a word such as
    "call" or "phone" in the same clause with no word such as "order" or "ticket" between.
    Dates and dotted addresses (IPs, versions) are not phones."""
    if not SEVEN_DIGITS.search(text):
        return []
    found = []
    for m in WRITTEN_PHONE.finditer(text):
        number = m.group()
        digits = re.sub(r"\D", "", re.split(r"\s?(?:x|ext)", number)[0])
        if not 7 <= len(digits) <= 15 or DATE_OR_ADDRESS.fullmatch(number):
            continue
        clause = CLAUSE_END.split(text[max(0, m.start() - 60) : m.start()])[-1]
        blocked = NOT_A_PHONE.search(clause)
        prefixed = number.startswith(("+", "(")) or (
            number.startswith("0") and (len(digits) <= 12 or digits.startswith("00"))
        )
        cued = PHONE_CUE.search(clause) and not blocked
        if (prefixed and not blocked) or cued:
            found.append(Found(m.start(), m.end(), "PHONE"))
    return found
