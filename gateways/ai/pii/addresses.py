"""Postal addresses by grammar: a street line (number and street, a P.O. box, or a Japanese
chōme-banchi-gō block) followed by the comma-separated parts that belong to an address (unit,
city, district, state and postal code, country). A city or a street name alone is not an
address: without a number the grammar matches nothing."""

from __future__ import annotations

import re

from gateways.ai.pii.spans import Found

_SUFFIX = (
    r"(?:Street|St|Avenue|Ave|Road|Rd|Lane|Ln|Boulevard|Blvd|Drive|Dr|Way|Court|Ct|Place|Pl"
    r"|Terrace|Ter|Square|Sq|Parkway|Pkwy|Highway|Hwy|Circle|Cir|Close|Crescent|Row|Mews"
    r"|Gardens|Walk|Hill|Trail|Alley)\b\.?(?:\s+(?:NW|NE|SW|SE|N|S|E|W)\b)?"
)
_WORD = r"[A-Z][\w'\u2019.-]*"
_STREET_WORD = rf"(?:{_WORD}|\d{{1,3}}(?:st|nd|rd|th))"  # Fifth, 4th, W
# No digits, and a whole word: in "London NW1 6XE" the city ends before the postcode.
_PLACE_WORD = r"[A-Z][^\W\d_]*(?:[-'\u2019][^\W\d_]+)*\b"
_CONTINENTAL = r"[A-ZÄÖÜ][\wäöüß-]*(?:straße|strasse|str\.|weg|platz|allee|gasse|ring|damm)"
_LATIN_PREFIX = r"(?:Rue|Avenue|Boulevard|Calle|Via|Viale|Rua|Avenida|Plaza|Piazza|Carrer)"
_STREET = re.compile(
    r"(?:\b(?:Flat|Apt|Apartment|Unit|Suite)\s+\w+,\s*)?"
    r"(?:"
    rf"\b\d{{1,6}}[A-Za-z]?\s+(?:{_STREET_WORD}\s+){{0,4}}{_SUFFIX}"  # 742 Evergreen Terrace
    r"(?:,?\s+(?:Apt|Apartment|Suite|Unit|\#)\.?\s*\w+)?"
    rf"|\b\d{{1,5}}\s+{_LATIN_PREFIX}\s+(?:(?:de|del|la|du|des|di)\s+)?(?:{_WORD}\s*){{1,3}}"
    rf"|\b{_LATIN_PREFIX}\s+(?:(?:de|del|la|du|des|di)\s+)?(?:{_WORD}\s+){{1,3}}\d{{1,5}}\b"
    rf"|\b{_CONTINENTAL}\s+\d{{1,5}}[a-z]?\b"  # Hauptstraße 12
    r"|\bP\.?\s?O\.?\s+Box\s+\d+"
    r"|\b\d{1,4}-\d{1,4}(?:-\d{1,4})?\s+[A-Z][a-z]+\b"  # 1-2-3 Shibuya
    r")"
)
_UK_POSTCODE = r"[A-Z]{1,2}\d[A-Z\d]?\s*\d[A-Z]{2}"
_TAIL_PART = re.compile(
    r",\s*(?:"
    r"(?:Apt|Apartment|Suite|Unit|Floor|Fl|Room|#)\.?\s*\w+"
    r"|[A-Z]{2}\s+\d{5}(?:-\d{4})?"  # TX 78701
    r"|\d{3}-\d{4}"  # Japanese postal code alone
    rf"|(?:\d{{4,6}}\s+)?{_PLACE_WORD}(?:\s+{_PLACE_WORD}){{0,2}}"
    rf"(?:\s+(?:\d{{3}}-\d{{4}}|\d{{5,6}}|{_UK_POSTCODE}))?"
    rf"|{_UK_POSTCODE}"
    r")"
)
_TAIL_POSTCODE = re.compile(rf"\s+(?:{_UK_POSTCODE}|\d{{5,6}})\b")
MAX_TAIL_PARTS = 4


def find_addresses(text: str) -> list[Found]:
    found = []
    for m in _STREET.finditer(text):
        end = m.end()
        if tail := _TAIL_POSTCODE.match(text, end):
            end = tail.end()
        for _ in range(MAX_TAIL_PARTS):
            part = _TAIL_PART.match(text, end)
            if part is None:
                break
            end = part.end()
        found.append(Found(m.start(), end, "ADDRESS"))
    return found
