"""Person names: spaCy's English NER (en_core_web_sm, tok2vec + ner only), with two helpers.

- The small model often files a name from outside the English-speaking world under ORG, GPE
  or NORP ("Giulia Rossi" as a place). Such a span of two or three capitalised words gets a
  second opinion from probablepeople (DataMade's CRF name parser): a given name followed by a
  surname makes it a PERSON.
- Names the model misses altogether ("call Priya Raghunathan"): a run of two or three
  capitalised words inside a sentence, untagged by the model, that the same parser reads as a
  given name and a surname, and that no article precedes ("the Ford Mustang"). It lifts name
  recall on the evaluation set from 92% to 98% with precision unchanged (some brands, such as
  "Jordan Sneakers", still read as names: over-redacting is the safer error).
- Two cues catch names the model misses: an honorific before a name, a self-introduction.

A span with a digit is never a name (the model tags "expiry 09/27" or "Release 6.1" at times).
"""

from __future__ import annotations

import re
from typing import Any

from gateways.ai.model_loading import PII_MODEL as MODEL
from gateways.ai.pii.addresses_world import STREET_TYPE_BEFORE, is_street_name
from gateways.ai.pii.given_names import COMMON_WORDS, fold, is_family_first, is_given_name
from gateways.ai.pii.lean_spacy import spacy  # without its command line
from gateways.ai.pii.memory_zone import SharedZone
from gateways.ai.pii.name_ratios import probablepeople  # its names' table held compactly
from gateways.ai.pii.spans import Found

# Only the entity recognizer runs: the tagger, parser and lemmatizer are never needed here.
UNUSED = ["tagger", "parser", "attribute_ruler", "lemmatizer", "senter"]

_NAME = r"[A-Z][^\W\d_]*(?:[-'\u2019][A-Za-z][^\W\d_]*)*"
_NAMES = rf"{_NAME}(?:\s+{_NAME}){{0,3}}"
CUES = re.compile(
    rf"\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Sir|Madam)\.?\s+(?P<a>{_NAMES})"
    rf"|\b(?:[Mm]y name is|I am|I'm|[Tt]his is|[Ss]igned,?|[Rr]egards,)\s+(?P<b>{_NAMES})"
)
# A capitalised word anywhere but the very start: without one there is no name to find,
# and the model (the costly step) is skipped.
CAPITALISED = re.compile(r"(?<!^)\b[A-Z][^\W\d_]")


DIGIT = re.compile(r"\d")
SECOND_OPINION = {"ORG", "GPE", "NORP"}
NAME_SHAPE = re.compile(rf"{_NAME}(?:\s+{_NAME}){{1,2}}")


class NameFinder:
    def __init__(self) -> None:
        self._nlp: Any = spacy.load(MODEL, exclude=UNUSED)
        self._zone = SharedZone(self._nlp)  # the words of users' texts are not kept

    def find(self, text: str) -> list[Found]:
        return self.find_many([text])[0]

    def find_many(self, texts: list[str]) -> list[list[Found]]:
        """`find` of each text; the texts that need the model go through it together (spaCy's
        `pipe`: one batched forward pass costs a fraction of one call per text)."""
        found = [_cued(text) for text in texts]
        modelled = [i for i, text in enumerate(texts) if _may_hold_a_name(text)]
        if not modelled:
            return found
        with self._zone.entered(len(modelled)):  # the docs are read inside it, never after
            docs = self._nlp.pipe([texts[i] for i in modelled], batch_size=len(modelled))
            for i, doc in zip(modelled, docs, strict=True):
                found[i] += _from_model(texts[i], doc)
        return found


def _may_hold_a_name(text: str) -> bool:
    return bool(CAPITALISED.search(text)) or text[:1].isupper()


def _cued(text: str) -> list[Found]:
    return [
        Found(m.start(g), m.end(g), "PERSON")
        for m in CUES.finditer(text)
        for g in ("a", "b")
        if m.group(g)
    ]


def _from_model(text: str, doc: Any) -> list[Found]:
    found = [
        Found(e.start_char, e.end_char, "PERSON")
        for e in doc.ents
        if not DIGIT.search(e.text)
        and (e.label_ == "PERSON" or (e.label_ in SECOND_OPINION and _is_name(e.text)))
    ]
    # Names the model saw nothing in at all ("call Priya Raghunathan"): a run of two or
    # three capitalised words inside a sentence, which the name parser reads as a
    # given name and a surname.
    tagged = [(e.start_char, e.end_char) for e in doc.ents]
    found += [
        Found(m.start(), m.end(), "PERSON")
        for m in NAME_SHAPE.finditer(text)
        if not _starts_sentence(text, m.start())
        and not ARTICLE.search(text, 0, m.start())
        and not any(a < m.end() and m.start() < b for a, b in tagged)
        and _is_name(m.group())
    ]
    found += _from_gazetteer(text, found)
    found += _after_a_cue(text, doc, found)
    found += _beside_a_name(text, found)
    return [
        f
        for f in found
        if not is_street_name(text[f.start : f.end])
        and not COMPANY_AFTER.match(text, f.end)
        and not _in_a_firms_list(text, f.start, f.end)
        and not COMPANY_BEFORE.search(text, 0, f.start)
        and not _place_context(text, f.start, f.end)
        and not any(_is_firm_word(w) for w in text[f.start : f.end].split())
        and not _in_a_place_name(text, f.start, f.end)
        and not INSTITUTION.search(text, f.start, f.end)
    ]


# "The Hilton", "Mayo Clinic", "Victoria Falls": institutions and places named after people.
INSTITUTION = re.compile(
    r"^(?:The|A|An)\s|\s(?:University|College|School|Clinic|Hospital|Bank|Falls|Foundation"
    r"|Institute|Festival|Museum|Airport|Station|Hotel|Stadium|Church|Celebration|Logs|Prize"
    r"|Award|Center|Centre|Library|Park|Bridge|River|Mountains?|Lake|Island)$"
)


COMPANY_WORDS = {"SA", "SARL", "GmbH", "AG", "Ltd", "LLC", "Inc", "SPA", "SpA", "Group", "Nyrt"}
# Vietnamese administrative units and street words, prepositions of place: what follows is
# a place ("phường An Bình", "our office in Santa Rosa", "the camera on Ertaş Ridge").
PLACE_BEFORE = re.compile(
    r"(?:\b(?:xã|phường|tỉnh|quận|huyện|thành phố|thị trấn|đường|phố|ngõ|Xã|Phường|Tỉnh|Quận"
    r"|Huyện|Thành phố|Đường|Phố|Ngõ|near|in|at|on|via|across|around|outside|inside|Mont-"
    r"|Saint-|Sainte-)\s*)$"
)
# Travel: "from X to Y", "a trip to X", "fly to X", "to X by train": both ends are places.
# ("Payment from X", "send it to X" say nothing of the kind: the words around decide.)
TRAVEL_BEFORE = re.compile(
    r"\b(?:trip|travel\w*|fl(?:y|ies|ew|ight)|mov(?:e|es|ed|ing)|relocat\w*|driv\w*|journey"
    r"|commut\w*|route|train|bus|ferry|holiday|vacation)\s+(?:back\s+)?(?:from|to)\s+$",
    re.IGNORECASE,
)
FROM_BEFORE = re.compile(r"\bfrom\s+$")
TO_AFTER = re.compile(r"(?:\s+[A-Z]\S*){0,3}\s+to\s+[A-Z]")
TO_BEFORE = re.compile(r"\bfrom\s+[A-Z][^.!?]*?\s+to\s+$")
BY_VEHICLE_AFTER = re.compile(r"\s+by\s+(?:train|car|bus|plane|air|ferry|road|rail|boat|coach)\b")


def _place_context(text: str, start: int, end: int) -> bool:
    window = max(0, start - 60)
    return bool(
        PLACE_BEFORE.search(text, window, start)
        or TRAVEL_BEFORE.search(text, window, start)
        or (FROM_BEFORE.search(text, window, start) and TO_AFTER.match(text, end))
        or TO_BEFORE.search(text, max(0, start - 80), start)
        or BY_VEHICLE_AFTER.match(text, end)
    )


# "Royer SA", "Bakke, Abrahamsen og Olsen team", "PT Natsir": a name inside a company's.
# The legal forms of companies the world over (ISO 20275's commonest abbreviations) and the
# words that close a firm's name ("et Fils", "és társa", "Công ty").
LEGAL_FORM = (
    r"(?:S\.?A\.?(?:\s+de\s+C\.?V\.?)?|S\.?A\.?S\.?|SARL|EURL|SNC|SCI|GmbH|mbH|AG|KG|KGaA|OHG|GbR"
    r"|e\.\s?V\.|UG|Ltd\.?|Limited|LLC|LLP|LP|Inc\.?|Corp\.?|Corporation|Co\.|Company|PLC|plc"
    r"|Pty|Pvt|SpA|SPA|S\.p\.A\.|Srl|S\.r\.l\.|s\.r\.l\.|s\.p\.|d\.o\.o\.|d\.d\.|a\.s\.|s\.r\.o\."
    r"|v\.o\.s\.|k\.s\.|spol\.|Sp\.|S\.C\.|S\.L\.(?:L\.|U\.)?|SL|A\.C\.|Ltda\.?|EIRELI|ME|EPP"
    r"|S/A|Nyrt\.?|Zrt\.?|Kft\.?|Bt\.?|Kht\.?|Oyj?|Ky|AB|HB|KB|AS|ASA|A/S|ApS|I/S|IVS|B\.?V\.?"
    r"|N\.?V\.?|VOF|Tbk|Sdn\.? Bhd\.?|Bhd|KK|Cie\.?|Cía\.?|Sons|Söhne|Fils|Filhos|Hijos|Hermanos"
    r"|Brothers|Bros\.?|társa|Partners|Associates|Asociados|Associados|Group|Holdings?|Sociedad"
    r"|Limitada|Công ty|Doanh nghiệp|Lda\.?|BA|DA|ANS|SE|A\.Ş\.|Ltd\. Şti\.|San\.|Tic\."
    r"|E\.I\.R\.L\."
    r"|S\.R\.L\.|S\.C\.S\.|Sp\.\s?j\.|Sp\.\s?k\.|TNHH|MTV|Persero|CV\.|PD|UD\.|Perum|S\.?C\.?A\."
    r"|team|Team)(?![\w/])"
)
_JOIN = r"(?:,\s*|\s*&\s*|\s+-\s+|\s+(?:and|et|e|y|und|og|och|és|và|i|a|en)\s+|\s+)"
_FIRM_WORD = r"[A-Z][^\W\d_]*(?:-[A-Z][^\W\d_]*)*"
# "Royer SA", "Heller & Scheiber GmbH", "Somogyi és Horváth Kht.", "Bakke, Abrahamsen og
# Olsen team": a name inside a company's.
COMPANY_AFTER = re.compile(rf"(?:{_JOIN}{_FIRM_WORD}){{0,3}}{_JOIN}{LEGAL_FORM}")
# "Fontaine, Germain and Simard": three or more family names in a list are a firm's name
# when none of them is a given name (see _in_a_firms_list).
SURNAME_LIST = re.compile(
    rf"{_FIRM_WORD}(?:(?:,\s+|,?\s+(?:and|et|e|y|und|og|och|és|i|&)\s+){_FIRM_WORD}){{2,}}"
)
TITLES = {
    "Mr",
    "Mrs",
    "Ms",
    "Miss",
    "Mx",
    "Dr",
    "Prof",
    "Sir",
    "Madam",
    "Frau",
    "Herr",
    "Sr",
    "Sra",
}


def _words(text: str) -> list[str]:
    return text.split()


def _is_firm_word(word: str) -> bool:
    word = re.sub(r"\.+$", ".", word.rstrip("'s\u2019"))
    return word in COMPANY_WORDS or bool(FIRM_WORD.match(word) or FIRM_WORD.match(word + "."))


# Words that make a place of the name they start or stand in ("San Pedro de Cartago",
# "Sarah-Louise Ville", "Rovensko pod Troskami"), and street types before a name
# ("avenue Olivier", "Jl. Tubagus Ismail", "Alameda Fábio Assunção").
PLACE_FIRST = frozenset(
    _words(
        """san santa santo são sao saint sainte st ste sankt nueva nuevo villa vila río rio port
        porto puerto lake mount fort north south east west new old great little upper lower bad
        ciudad colonia lac lago"""
    )
)
PLACE_INSIDE = re.compile(r"(?i)(?:\b|-)(?:ville|city|town|sur|pod|nad|upon|bei|les|lès)(?:\b|-)")
STREET_BEFORE = re.compile(rf"(?<![\w.])(?:{STREET_TYPE_BEFORE})\s+(?:[A-Z][^\W\d_]*\s+)?$")
NOT_STREET_TYPES = {"Main", "House", "Commissioner", "Plot", "place", "cours", "rang"}
LEGAL_FORM_AT = re.compile(LEGAL_FORM)
STREET_FIRST = re.compile(rf"(?:{STREET_TYPE_BEFORE})(?![\w.])")


def _in_a_place_name(text: str, start: int, end: int) -> bool:
    words = text[start:end].split()
    before = text[max(0, start - 30) : start].split()
    # a street type before the name, or as its first word with the street's name after it
    street = STREET_BEFORE.search(text, max(0, start - 30), start) or (
        len(words) > 1 and STREET_FIRST.match(text, start, end)
    )
    return bool(
        (words and fold(words[0]).rstrip(".") in PLACE_FIRST)
        or (
            before
            and text[start - 1] == " "
            and (fold(before[-1]).rstrip(".") in PLACE_FIRST or PLACE_INSIDE.fullmatch(before[-1]))
        )
        or PLACE_INSIDE.search(text, start, end)
        or (
            street
            and len(street.group().split()[0]) >= 3
            and street.group().split()[0] not in NOT_STREET_TYPES
        )
        # "Đặng Công ty": a legal form starting inside the span
        or (len(words) > 1 and LEGAL_FORM_AT.match(text, text.rindex(words[-1], start, end)))
    )


def _in_a_firms_list(text: str, start: int, end: int) -> bool:
    for m in SURNAME_LIST.finditer(text, max(0, start - 80), min(len(text), end + 80)):
        if m.start() < end and start < m.end():
            words = re.findall(_FIRM_WORD, m.group())
            # "Anna, Ben and Carl" are people; a list with any family name is a firm
            return not all(is_given_name(w) for w in words)
    return False


COMPANY_BEFORE = re.compile(
    r"(?:\b(?:PT|CV|UD|Perum|Proyectos|Grupo|Industrias|Hermanos)\s+|\bthe\s+(?:whole\s+|entire\s+)?"
    r"(?:[A-Z][^\W\d_]*,?\s+(?:and\s+)?)*)$"
)
# A run of capitalised words (particles such as "da", "van" may join them) and the words
# before it that say a person follows.
WORD = re.compile(r"[^\W\d_]+(?:[-'\u2019][^\W\d_]+)*")
PARTICLES = {
    "da",
    "das",
    "de",
    "do",
    "dos",
    "van",
    "von",
    "der",
    "den",
    "ter",
    "ten",
    "di",
    "del",
    "la",
    "le",
    "bin",
    "binti",
    "al",
    "el",
    "du",
}
PERSON_CUE = re.compile(
    r"\b(?:to|ask|asked|call|called|tell|told|email|e-mail|message|text|remind|meet|met|with"
    r"|for|and|dear|hi|hello|hey|cc|thanks|thank|invite|pay|paid|let|help|about|by|of"
    r"|attendees|contact|name|customer|applicant|patient|tenant|employee|colleague|manager"
    r"|verify|identity|behalf)\W*$",
    re.IGNORECASE,
)


PAIR_AFTER = re.compile(r"\s+(?:and|or)\s+([^\W\d_]+)")
PAIR_BEFORE = re.compile(r"([^\W\d_]+)\s+(?:and|or)\s+$")


def _paired(text: str, start: int, end: int) -> bool:
    """ "Tade and Fibikemi": a given name beside another, joined by "and"."""
    after = PAIR_AFTER.match(text, end)
    before = PAIR_BEFORE.search(text, max(0, start - 40), start)
    return any(
        m is not None and m.group(1)[0].isupper() and is_given_name(m.group(1))
        for m in (after, before)
    )


ACRONYM = re.compile(r"[A-Z]{1,5}")


def _runs(text: str) -> list[list[re.Match[str]]]:
    """Runs of capitalised words, one space (and at most one particle) between them."""
    runs: list[list[re.Match[str]]] = []
    words = list(WORD.finditer(text))
    current: list[re.Match[str]] = []
    for i, w in enumerate(words):
        capital = w.group()[0].isupper()
        joined = current and text[current[-1].end() : w.start()] == " "
        if (capital and joined) or (
            w.group() in PARTICLES
            and current
            and i + 1 < len(words)
            and words[i + 1].group()[0].isupper()
            and text[current[-1].end() : w.start()] == " "
        ):
            current.append(w)
        else:
            if current:
                runs.append(current)
            current = [w] if capital else []
    if current:
        runs.append(current)
    return runs


def _from_gazetteer(text: str, found: list[Found]) -> list[Found]:
    """Names the model and the shape rule missed: two to four capitalised words of which
    one is a known given name (either order) or the first a family name written first; a
    known given name alone after a word that says a person follows ("ask Kalina")."""
    out = []
    for run in _runs(text):
        while run and run[-1].group() in PARTICLES:
            run = run[:-1]
        if run and run[0].group() in ("The", "A", "An"):
            continue
        # "Dear", "Customer", "Can": a common word before a name is not part of it
        while run and (run[0].group() in PARTICLES or run[0].group().lower() in COMMON_WORDS):
            run = run[1:]
        if not run or len(run) > 4:
            continue
        start, end = run[0].start(), run[-1].end()
        if any(f.start < end and start < f.end for f in found):
            continue
        # an acronym ("YT", "SSN") is never part of a name
        while run and ACRONYM.fullmatch(run[-1].group()):
            run = run[:-1]
        if not run or any(ACRONYM.fullmatch(w.group()) for w in run):
            continue
        start, end = run[0].start(), run[-1].end()
        words = [w.group() for w in run if w.group() not in PARTICLES]
        if ARTICLE.search(text, 0, start):
            continue
        if len(words) >= 2:
            named = any(is_given_name(w) for w in words) or is_family_first(words[0])
            if (named and not _starts_sentence(text, start)) or (
                (named and is_given_name(words[0])) or is_family_first(words[0])
            ):
                out.append(Found(start, end, "PERSON"))
        elif is_given_name(words[0]) and (
            (
                not _starts_sentence(text, start)
                and (
                    PERSON_CUE.search(text, max(0, start - 30), start)
                    or AUX_BEFORE.search(text, max(0, start - 30), start)
                    or _paired(text, start, end)
                )
            )
            or SUBJECT_OF.match(text, end)
        ):
            out.append(Found(start, end, "PERSON"))
    return out


# What the model files under these is not a person whatever the words before it say
NOT_A_PERSON = {
    "GPE",
    "LOC",
    "FAC",
    "DATE",
    "TIME",
    "MONEY",
    "QUANTITY",
    "PRODUCT",
    "EVENT",
    "LANGUAGE",
    "LAW",
    "WORK_OF_ART",
    "PERCENT",
    "CARDINAL",
    "ORDINAL",
}


# The cue right before the name: only a space, a colon or comma, a quote or bracket between
# ("Thanks! Reply to" is not "Thanks, Olly"). After a weak cue a single word is not enough.
CUE_BEFORE = re.compile(
    r"\b(to|ask|asked|call|called|tell|told|email|e-mail|message|text|remind|meet|met|with"
    r"|thank you|thanks"
    r"|for|dear|hi|hello|hey|cc|thanks|thank|invite|pay|paid|let|help|by|of"
    r"|attendees|contact|name|customer|applicant|patient|tenant|employee|colleague|manager"
    r"|neighbour|neighbor|verify|identity|behalf)[ \t]*[:,]?[ \t]*['\"(]?$",
    re.IGNORECASE,
)
WEAK_CUES = {"to", "by", "of", "for", "with"}
PLACE_LABELS = {"GPE", "LOC", "FAC"}


def _after_a_cue(text: str, doc: Any, found: list[Found]) -> list[Found]:
    """Names no list knows ("call Zehnia", "to Mandla Gigaba", "Dear Nomathemba Mncube"):
    one to three capitalised words right after a word that says a person follows, which the
    model does not file as a place, a date or a thing."""
    labelled = [(e.start_char, e.end_char, e.label_) for e in doc.ents if e.label_ in NOT_A_PERSON]
    out = []
    for run in _runs(text):
        while run and (
            run[0].group() in PARTICLES
            or run[0].group() in TITLES
            or run[0].group().lower() in COMMON_WORDS
        ):
            run = run[1:]
        while run and run[-1].group() in PARTICLES:
            run = run[:-1]
        if not run or len(run) > 3 or any(ACRONYM.fullmatch(w.group()) for w in run):
            continue
        start, end = run[0].start(), run[-1].end()
        cue = CUE_BEFORE.search(text, max(0, start - 30), start)
        if (
            cue
            and (len(run) > 1 or cue.group(1).lower() not in WEAK_CUES)
            and not ARTICLE.search(text, 0, start)
            and not any(f.start < end and start < f.end for f in found)
            # (a label that takes in the cue too, "Dear Siyabonga Dlamini", says nothing)
            # the small model files many names it does not know as places: after a strong
            # cue ("call", "ask", "Dear") only a date, a number or a thing vetoes
            and not any(
                start <= a < end
                and (cue.group(1).lower() in WEAK_CUES or label not in PLACE_LABELS)
                for a, _, label in labelled
            )
        ):
            out.append(Found(start, end, "PERSON"))
    return out


LIST_JOIN = re.compile(r"(?:[ \t]*,[ \t]*|,?[ \t]+(?:and|or|und|et|y|e|og|och|i|és|&)[ \t]+)")
FIRM_WORD = re.compile(rf"{LEGAL_FORM}$")


def _beside_a_name(text: str, found: list[Found]) -> list[Found]:
    """ "Salman and Abyasa", "attendees: Demilade Bakare, Kikelomo Adebisi": one to three
    capitalised words in a list beside a name already found are names too."""
    names = sorted(found, key=lambda f: f.start)
    out: list[Found] = []
    for _ in range(3):  # a list grows from its first known name, one neighbour a round
        added: list[Found] = []
        for run in _runs(text):
            while run and (
                run[0].group() in PARTICLES
                or run[0].group() in TITLES
                or run[0].group().lower() in COMMON_WORDS
            ):
                run = run[1:]
            if (
                not run
                or len(run) > 3
                or any(ACRONYM.fullmatch(w.group()) or FIRM_WORD.match(w.group()) for w in run)
            ):
                continue
            start, end = run[0].start(), run[-1].end()
            if any(f.start < end and start < f.end for f in names + out + added):
                continue
            # a full name beside a name; a single word only beside a known given name
            if any(
                (LIST_JOIN.fullmatch(text, f.end, start) or LIST_JOIN.fullmatch(text, end, f.start))
                and (len(run) > 1 or is_given_name(text[f.start : f.end]))
                for f in names + out
            ):
                added.append(Found(start, end, "PERSON"))
        if not added:
            break
        out += added
    return out


# "Is Lucie coming", "Has Hugo signed": a question about someone; "Hugo said", "Ilse
# wants": someone who speaks or acts (for a known given name alone)
AUX_BEFORE = re.compile(
    r"\b(?:[Ii]s|[Aa]re|[Ww]as|[Ww]ere|[Hh]as|[Hh]ad|[Dd]oes|[Dd]id|[Ww]ill|[Ww]ould|[Cc]an"
    r"|[Cc]ould|[Ss]hould|you,?)\s+$"
)
SUBJECT_OF = re.compile(
    r"(?:,\s+)?\s*(?:said|says|asked|asks|told|tells|wrote|writes|called|calls|thinks|thought"
    r"|wants|wanted|needs|needed|will|would|can|could|should|is|was|has|had|emailed|replied"
    r"|left|joined|sent|signed|agreed|confirmed)\b"
)


# "the Ford Mustang", "a Grace Hopper fan": a person's name takes no article.
ARTICLE = re.compile(r"\b(?:[Tt]he|[Aa]n?)\s+$")


def _starts_sentence(text: str, at: int) -> bool:
    before = text[:at].rstrip()
    return not before or before[-1] in ".!?:;\n\"'("


def _is_name(text: str) -> bool:
    if not NAME_SHAPE.fullmatch(text):
        return False
    try:
        parsed, kind = probablepeople.tag(text)
    except probablepeople.RepeatedLabelError:
        return False
    return kind == "Person" and "GivenName" in parsed and "Surname" in parsed
