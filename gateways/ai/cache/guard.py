"""The semantic tier's guard: after the vector search, two prompts must agree on what makes an
answer specific, or the hit is refused.

A sentence embedding scores "Summarize ticket 4411" and "Summarize ticket 4412" as nearly the
same text (0.98), and "Did A pay B?" and "Did B pay A?" higher still: it encodes the topic, not
the particulars. So a candidate found by similarity is compared with the new prompt on:
- numbers, with the unit written after each (4411 / 4412; 3 kg / 3 pounds; 7 am / 7 pm);
- units named as a conversion's target ("convert 5 km to miles" / "… to feet");
- identifiers: tokens that mix letters and digits or carry a digit inside punctuation
  (ORD-1234, a1b2c3, web-35.f40, 2.4.1, 2024-02-05), and bracketed or back-quoted codes;
- names: capitalised words not opening a sentence, all-capital words, quoted strings, and
  relative days (today, tomorrow, …): people, places, companies, months, weekdays (a unit
  written in capitals, USD or Celsius, is compared as a unit);
- negation: the count of negating words ("not", "n't", "never", "no", "without", …), a
  word against its negated form (safe / unsafe), and a word against its opposite (open /
  closed, passed / failed: `OPPOSITES`);
- roles: the same words with two phrases exchanged ("A sent B the file" / "B sent A the file").
Moving a phrase ("On Monday, remind me" / "Remind me on Monday") is not an exchange.

`anchored` says the prompts share at least one number, identifier or name, all agreeing: the
cache accepts such a pair from a lower similarity (`ResponseCache`), since what would make
their answers differ has been compared; a prompt with no anchors is judged on its similarity
alone.

Pure Python over short texts (a lookup's 4 candidates: ~0.1 ms, ~0.25 ms with nothing
memoised; tests/bench/ai_cache_rewording.py): it runs on the event loop.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass

from cachetools import LRUCache, cached

# Unit spellings → one name. Only words that name a unit after a number or as a conversion's
# target; "in", "m", "s" are left out (too often something else).
_UNIT_GROUPS = {
    "km": "km kms kilometer kilometers kilometre kilometres",
    "meter": "meter meters metre metres",
    "cm": "cm centimeter centimeters centimetre centimetres",
    "mm": "mm millimeter millimeters millimetre millimetres",
    "mile": "mi mile miles",
    "foot": "ft foot feet",
    "inch": "inch inches",
    "yard": "yd yard yards",
    "kg": "kg kgs kilo kilos kilogram kilograms kilogramme kilogrammes",
    "gram": "g gram grams gramme grammes",
    "mg": "mg milligram milligrams",
    "pound": "lb lbs pound pounds",
    "ounce": "oz ounce ounces",
    "ton": "ton tons tonne tonnes",
    "liter": "l liter liters litre litres",
    "ml": "ml milliliter milliliters millilitre millilitres",
    "gallon": "gal gallon gallons",
    "cup": "cup cups",
    "tablespoon": "tbsp tablespoon tablespoons",
    "teaspoon": "tsp teaspoon teaspoons",
    "second": "sec secs second seconds",
    "minute": "min mins minute minutes",
    "hour": "h hr hrs hour hours",
    "day": "day days",
    "week": "wk wks week weeks",
    "month": "month months",
    "year": "yr yrs year years",
    "decade": "decade decades",
    "celsius": "c °c celsius centigrade",
    "fahrenheit": "f °f fahrenheit",
    "kelvin": "k kelvin",
    "usd": "usd dollar dollars $",
    "eur": "eur euro euros €",
    "gbp": "gbp £ sterling",
    "jpy": "jpy yen ¥",
    "chf": "chf franc francs",
    "inr": "inr rupee rupees ₹",
    "cny": "cny rmb yuan",
    "percent": "% percent per-cent percentage",
    "kb": "kb kib kilobyte kilobytes",
    "mb": "mb mib megabyte megabytes",
    "gb": "gb gib gigabyte gigabytes",
    "tb": "tb tib terabyte terabytes",
    "byte": "byte bytes",
    "am": "am a.m.",
    "pm": "pm p.m.",
    "watt": "w watt watts",
    "kwh": "kwh",
    "volt": "v volt volts",
    "mph": "mph",
    "kmh": "kph km/h kmh",
}
UNITS = {s: name for name, spellings in _UNIT_GROUPS.items() for s in spellings.split()}
# Single letters name a unit only right after a number ("5 l", "20 c"), never alone.
_LOOSE_UNITS = {s for s in UNITS if len(s) == 1 and s.isalpha()}
_DEGREES = {"degree", "degrees", "deg", "°"}
_TARGETS = {"to", "into", "in", "many", "much", "as"}

_NUMBER_WORDS = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
    "hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "dozen": 12,
}  # fmt: skip

_NEGATIONS = re.compile(
    r"\b(?:not|no|never|none|nothing|nobody|nowhere|neither|nor|without|cannot)\b|n[\u2019']t\b",
    re.IGNORECASE,
)
_NEGATING_PREFIXES = ("un", "in", "im", "il", "ir", "dis", "non", "non-")

# A word against its opposite: common pairs of English, not a list of the pairs tested.
_OPPOSITE_PAIRS = """
open closed; open close; include exclude; included excluded; including excluding; allow forbid;
allowed forbidden; allow deny; allowed denied; accept reject; accepted rejected; approve reject;
approved rejected; pass fail; passed failed; passing failing; win lose; won lost; enable disable;
enabled disabled; add remove; added removed; increase decrease; increased decreased; buy sell;
bought sold; before after; above below; over under; more less; most least; more fewer;
minimum maximum; min max; first last; start stop; start end; begin end; true false; valid invalid;
success failure; succeed fail; succeeded failed; import export; upload download; encrypt decrypt;
encrypted decrypted; lock unlock; push pull; input output; inbound outbound; incoming outgoing;
higher lower; high low; faster slower; fast slow; cheap expensive; cheaper pricier;
cheapest priciest;
best worst; better worse; hot cold; warm cool; new old; young old; always never; all none;
everyone nobody; present absent; online offline; public private; internal external;
positive negative; left right; up down; north south; east west; day night; morning evening;
debit credit; income expense; profit loss; ascending descending; asc desc; largest smallest;
biggest smallest; longest shortest; long short; big small; large small; heavy light; full empty;
create delete; created deleted; install uninstall; subscribe unsubscribe; connect disconnect;
join leave; arrive depart; arrival departure; import export; send receive; sent received;
lend borrow; give take; gain lose; rise fall; raise lower; open shut; on off; yes no;
agree disagree;
like dislike; love hate; safe dangerous; legal illegal; possible impossible; need lack; have lack;
has lacks; with without; contains lacks; easy hard; easy difficult; simple complex; early late;
earliest latest; inside outside; import export; min max; senior junior; male female; men women;
boy girl; husband wife; mother father; buyer seller; employer employee; sender recipient;
winner loser; host guest;
"""
OPPOSITES: dict[str, set[str]] = {}
for _pair in _OPPOSITE_PAIRS.replace("\n", " ").split(";"):
    if _pair.strip():
        _a, _b = _pair.split()
        OPPOSITES.setdefault(_a, set()).add(_b)
        OPPOSITES.setdefault(_b, set()).add(_a)

_RELATIVE_DAYS = {"today", "tonight", "tomorrow", "yesterday", "weekend", "weekday", "weekdays"}
_BE = {"is": "be", "are": "be", "was": "be", "were": "be", "am": "be", "'s": "be", "\u2019s": "be"}
_WORD = re.compile(r"[^\W\d_]+(?:[\u2019'][^\W\d_]+)?", re.UNICODE)
_QUOTED = re.compile(
    r"(?<!\w)['\"\u201c\u2018`]([^'\"\u201d\u2019`]{1,80})['\"\u201d\u2019`](?!\w)"
)
_POSSESSIVE = re.compile(r"^(\w.*?)[\u2019']s$")
_BRACKETED = re.compile(r"[\[`]([^\]`\s]{2,64})[\]`]")
_TOKEN_EDGES = "\"'\u201c\u201d\u2018\u2019()[]{}<>,;:!?`*"
_PLAIN_NUMBER = re.compile(r"^[#№]?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?$")
_NUMBER_UNIT = re.compile(r"^(\d+(?:\.\d+)?)[-]?([a-z°%$€£¥₹/.]+)$")
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
_CURRENCY_FIRST = re.compile(r"^([$€£¥₹])(\d[\d,]*(?:\.\d+)?)$")


@dataclass(frozen=True)
class Facts:
    """What one prompt is specifically about, as the guard compares it."""

    numbers: tuple[tuple[str, str], ...]  # sorted (value, unit or "")
    units: frozenset[str]
    identifiers: frozenset[str]
    names: frozenset[str]
    negations: int
    words: frozenset[str]
    tokens: tuple[str, ...]  # lowercased words and numbers, in order, for the exchange check

    @property
    def anchors(self) -> bool:
        return bool(self.numbers or self.identifiers or self.names)


def _number(text: str) -> str:
    """A numeric value in one spelling: "4,411" → "4411", "2.50" → "2.5"."""
    value = text.replace(",", "")
    if "." in value:
        value = value.rstrip("0").rstrip(".")
    return value.lstrip("0") or "0"


def _unit_after(tokens: list[str], i: int) -> str:
    """The unit written after the number at `i` ("" if none): "5 km", "20 degrees Celsius"."""
    if i + 1 >= len(tokens):
        return ""
    word = tokens[i + 1].lower().rstrip(".")
    if word in _DEGREES:
        following = tokens[i + 2].lower().rstrip(".") if i + 2 < len(tokens) else ""
        return UNITS.get(following, "degree")
    return UNITS.get(word, "")


def _sentence_starts(text: str) -> set[int]:
    starts = {0}
    for match in re.finditer(r"[.!?:]\s+|\n+", text):
        starts.add(match.end())
    return starts


# The memo of facts, bounded by the prompts' words, not by their number: one prompt's facts
# take ~160 bytes a word (47 KB for 300 words), so 4,096 prompts of 16 KB held over 1 GB.
# 65,536 words are ~10 MB: ~4,000 prompts of 15 words. A longer prompt than that is not kept.
FACTS_MEMO_WORDS = 65_536


@cached(
    LRUCache(maxsize=FACTS_MEMO_WORDS, getsizeof=lambda found: len(found.tokens) + 1),
    lock=threading.Lock(),
)
def facts(text: str) -> Facts:
    """The facts of one prompt (memoised: a cached prompt is compared again and again, and
    its facts cost ~4 µs a word)."""
    raw = text.split()
    tokens = [t.strip(_TOKEN_EDGES) for t in raw]
    numbers: list[tuple[str, str]] = []
    units: set[str] = set()
    identifiers = {m.group(1).lower() for m in _BRACKETED.finditer(text)}
    for i, token in enumerate(tokens):
        low = token.lower().rstrip(".")
        if not low:
            continue
        before = tokens[i - 1].lower() if i else ""
        if low in UNITS and low not in _LOOSE_UNITS and before in _TARGETS:
            units.add(UNITS[low])  # a conversion's target: "to miles", "how many weeks"
        if not any(c.isdigit() for c in low):
            if low in _NUMBER_WORDS:
                numbers.append((str(_NUMBER_WORDS[low]), _unit_after(tokens, i)))
            continue
        if match := _PLAIN_NUMBER.match(low):
            spelled = match.group(1) + (match.group(2) or "")
            numbers.append((_number(spelled), _unit_after(tokens, i)))
        elif match := _ORDINAL.match(low):
            numbers.append((_number(match.group(1)), ""))
        elif (match := _CURRENCY_FIRST.match(low)) is not None:
            numbers.append((_number(match.group(2)), UNITS[match.group(1)]))
        elif (match := _NUMBER_UNIT.match(low)) and match.group(2) in UNITS:
            numbers.append((_number(match.group(1)), UNITS[match.group(2)]))
        else:  # letters with digits, or digits inside punctuation: a code, a date, a version
            identifiers.add(low.lstrip("#"))
    units.update(unit for _, unit in numbers if unit)
    # Names: capitalised words that do not open a sentence, words in capitals, quoted text.
    names: set[str] = {m.group(1).strip().lower() for m in _QUOTED.finditer(text)}
    starts = _sentence_starts(text)
    for match in _WORD.finditer(text):
        word = match.group()
        low = re.sub(r"[\u2019']s$", "", word.lower())
        capitalised = word != "I" and word[0].isupper()
        opening = match.start() in starts and not (len(word) > 1 and word.isupper())
        if low in _RELATIVE_DAYS or (capitalised and not opening and low not in UNITS):
            names.add(low)
    words = [w.lower() for w in _WORD.findall(text)]
    ordered: list[str] = []
    for token in tokens:
        low = token.lower().rstrip(".")
        owner = _POSSESSIVE.match(low)  # "Ana's notes": the owner is a phrase of its own
        ordered += [owner.group(1), "'s"] if owner else [_BE.get(low, low)] if low else []
    return Facts(
        numbers=tuple(sorted(numbers)),
        units=frozenset(units),
        identifiers=frozenset(identifiers),
        names=frozenset(names),
        negations=len(_NEGATIONS.findall(text)),
        words=frozenset(words),
        tokens=tuple(ordered),
    )


def _negated(a: frozenset[str], b: frozenset[str]) -> bool:
    """A word of one text is negated or turned into its opposite in the other."""
    for word in a - b:
        if len(word) >= 4 and any(p + word in b for p in _NEGATING_PREFIXES):
            return True
        if any(o in b and o not in a for o in OPPOSITES.get(word, ())):
            return True
    return False


def _exchanged(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """b is a with two different phrases exchanged around something: a = P X M Y S and
    b = P Y M X S, M not empty (with M empty it is one phrase moved: "On Monday, call A" /
    "Call A on Monday")."""
    if len(a) != len(b) or len(a) > 80 or Counter(a) != Counter(b) or a == b:
        return False
    start = 0
    while a[start] == b[start]:
        start += 1
    end = len(a)
    while a[end - 1] == b[end - 1]:
        end -= 1
    mid_a, mid_b = a[start:end], b[start:end]
    n = len(mid_a)
    for x in range(1, n):
        for y in range(1, n - x):
            if (
                mid_a[:x] != mid_a[n - y :]
                and mid_b == mid_a[n - y :] + mid_a[x : n - y] + mid_a[:x]
            ):
                return True
    return False


def refusal(cached: str, asked: str) -> str | None:
    """Why the answer cached for `cached` must not be served for `asked` (a word naming what
    differs: number, unit, identifier, name, negation, roles), or None when they agree."""
    a, b = facts(cached), facts(asked)
    if Counter(v for v, _ in a.numbers) != Counter(v for v, _ in b.numbers):
        return "number"
    if a.numbers != b.numbers or a.units != b.units:
        return "unit"
    if a.identifiers != b.identifiers:
        return "identifier"
    if a.names != b.names:
        return "name"
    if a.negations != b.negations or _negated(a.words, b.words) or _negated(b.words, a.words):
        return "negation"
    if _exchanged(a.tokens, b.tokens):
        return "roles"
    return None


def anchored(cached: str, asked: str) -> bool:
    """Both prompts name the same particulars (numbers, identifiers, names), at least one."""
    return refusal(cached, asked) is None and facts(asked).anchors
