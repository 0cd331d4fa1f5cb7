"""Postal addresses outside the US and UK forms of `addresses.py`: a street line in any of the
common layouts (number first, number last, "No."/"Nr."/"N°"/"#" before the number, a street
type before or inside the street's name), then the comma-separated unit, district, city,
region and postal code that follow. Street types and postal-code shapes come from the postal
conventions of each country (the UPU's address formats; USPS Publication 28 appendix C1 and the
AS/NZS 4819 road types for the English suffixes; the languages' words for street, road, square),
never from Faker's address providers.

A street line needs a street type, or a postal code after it: a capitalised word and a number
alone ("Release 6", "Room 101") are not an address."""

from __future__ import annotations

import re

from gateways.ai.pii.spans import Found

_UPPER = "".join(re.escape(c) for c in map(chr, range(0x41, 0x2000)) if c.isupper())
_UP = f"[{_UPPER}]"
_CAP = rf"{_UP}[^\W\d_]*(?:[-'\u2019.][^\W\d_]+)*\.?"  # Djunjunan, Saint-Honoré, Dr.
_LINK = (
    r"(?:de|del|de la|de las|de los|la|las|los|le|les|du|des|di|da|dos|das|do|van|der|den|"
    r"von|zu|am|im|y|e|v|pri|na|pod|nad|sur|-sur-Mer|xã|phường|tỉnh|quận|huyện|thành phố|"
    r"thị trấn|thị xã|đường|phố|ngõ|khóm|Khu|ấp)"
)
_NAME_WORDS = rf"{_CAP}(?:\s+(?:{_LINK}\s+)?{_CAP}){{0,4}}"

# A street type written as its own word, before the street's name.
_TYPE_BEFORE = (
    r"(?:Rue|rue|Avenue|avenue|Av\.|Avda\.|Boulevard|boulevard|Bd|chemin|Chemin|rang|Rang|"
    r"montée|allé|Allée|allée|impasse|Impasse|place|Place|quai|Quai|cours"
    r"|Calle|C\.|Cl\.|Cra\.|Cr\.|Carrera|Kr\.|Dg\.|Diagonal|Tv\.|Tr\.|Transversal|Avenida|"
    r"Paseo|Pasaje|Camino|Ronda|Glorieta|Cuesta|Vía|Via|Viale|Piazza|Piazzale|Borgo|"
    r"Rotonda|Contrada|Strada|Stretto|Vicolo|Largo|Corso|Canale|Incrocio|Rotonda|Salita"
    r"|Rua|Travessa|Praça|Alameda|Estrada|Rodovia|Quadra|Chácara|Recanto|Vereda|Viaduto|"
    r"Viaducto|Condomínio|Conjunto|Setor|Núcleo|Lote|Loteamento|Fazenda|Sítio|Vila|"
    r"Ladeira|Via|Passagem|Esplanada|Feira|Favela|Morro|Distrito|Residencial|Área|"
    r"Aeroporto|Campo|Colônia|Jardim|Lago|Parque|Pátio|Trecho|Trevo|Vale|Rampa"
    r"|Periférico|Prolongación|Circuito|Cerrada|Privada|Retorno|Andador|Calzada|Callejón|"
    r"Eje|Corredor|Circunvalación|Continuación|Ampliación|Diagonal|Boulevard"
    r"|Bulevardul|Bd\.|Strada|Str\.|Calea|Aleea|Splaiul|Intrarea|Drumul|Șoseaua|Soseaua|"
    r"Piața|Fundătura|Pasajul|Prelungirea|Ulița|Str"
    r"|ulica|ul\.|aleja|al\.|plac|pl\.|os\.|osiedle|rondo|Jalan|Jl\.|Jln\.|Gang|Gg\.|"
    r"Lorong|Soi|Thanon|Moo|Số|số|đường|Đường|phố|Phố|ngõ|Ngõ|Khóm|khóm|Ấp|ấp|Tổ|tổ"
    r"|Commissioner|Main|Plot|House)"
)
STREET_TYPE_BEFORE = _TYPE_BEFORE  # for the name finder: "avenue Olivier" is no person

# A street type at the end of the street's name, as its own word or inside it.
_TYPE_AFTER = (
    r"(?:Street|St|Avenue|Ave|Road|Rd|Lane|Ln|Boulevard|Blvd|Drive|Dr|Way|Court|Ct|Place|"
    r"Pl|Terrace|Ter|Square|Sq|Parkway|Pkwy|Highway|Hwy|Circle|Cir|Close|Crescent|Cres|"
    r"Row|Mews|Gardens|Walk|Hill|Trail|Alley|Path|Marg|Nagar|Ganj|Zila|Chowk|Colony|Cross|"
    r"Main|Layout|Sector|Block|Phase|Extension"
    r"|Village|Camp|Camps|Spur|Spurs|Loaf|Light|Lights|Vista|Vistas|Dam|Burg|Burgs|Ford|"
    r"Fords|Meadow|Meadows|Island|Islands|Centreway|Club|Break|Roads|Streets|Avenues|"
    r"Plains|Plain|Park|Parks|Point|Points|Port|Ports|Ridge|Ridges|River|Run|Shoal|Shoals|"
    r"Shore|Shores|Springs|Spring|Station|Stream|Summit|Throughway|Trace|Track|Tunnel|"
    r"Turnpike|Union|Unions|Valley|Valleys|Via|View|Views|Ville|Well|Wells|Wall|Heights|"
    r"Harbor|Harbors|Haven|Junction|Junctions|Key|Keys|Knoll|Knolls|Lake|Lakes|Land|"
    r"Landing|Loop|Mall|Manor|Manors|Mill|Mills|Mission|Motorway|Mount|Mountain|Mountains|"
    r"Neck|Orchard|Oval|Overpass|Pass|Passage|Pike|Pine|Pines|Prairie|Radial|Ramp|Ranch|"
    r"Rapid|Rapids|Rest|Skyway|Square|Squares|Causeway|Center|Centers|Cliff|Cliffs|Common|"
    r"Commons|Corner|Corners|Course|Courts|Cove|Coves|Creek|Crest|Crossing|Crossroad|"
    r"Curve|Dale|Divide|Drives|Estate|Estates|Expressway|Falls|Ferry|Field|Fields|Flat|"
    r"Flats|Forest|Forge|Forges|Fork|Forks|Fort|Freeway|Garden|Gateway|Glen|Glens|Green|"
    r"Greens|Grove|Groves|Hollow|Inlet|Isle|Brook|Brooks|Bluff|Bluffs|Bottom|Branch|"
    r"Bridge|Bypass|Canyon|Cape|Arcade|Beach|Bend|Grove|Parade|Esplanade|Promenade|Quay|"
    r"Rise|Vale|Wharf|Yard|Yards|Indlela|Isitaladi|Umgwaqo|Ithafa|Indawo|Line|Concourse|"
    r"Circlet|Close|Grange|Heath|Copse|Drove"
    r"|ulica|pot|naselje|utca|út|útja|tér|köz|sor|fasor|körút|cesta|trg|ulice|náměstí|"
    r"třída|nábřeží|role|cesta|rad|kuja|tie|katu|polku|tori|kaari|vej|gade|allé|plads|"
    r"vænget|gatan|vägen|gränd|torget|stigen|backen|gata|veien|vegen|gaten|plassen|stien|"
    r"lia|bakken|veg|svingen|vollen|åsen|ringen|grenda|tunet)"
)
_IN_WORD = (
    r"[^\W\d_]*(?:straße|strasse|str\.|weg|gasse|platz|allee|Allee|ring|damm|ufer|steig|"
    r"pfad|chaussee|gracht|laan|straat|singel|kade|dijk|plein|hof|park|vej|gade|gatan|"
    r"vägen|torget|veien|vegen|gata|katu|tie|kuja|ova|eva|ska|ská|ého|ého|ská|ova|ičeva|"
    r"ceva|ina|ulica)\b"
)
_NUMBER = (
    r"(?!\d{1,2}[/.]\d{1,2}[/.]\d{2,4})(?:(?:No\.|Nr\.|N°|Nº|nº|#|Số|"
    r"no\.)\s*)?\d{1,6}[A-Za-z]{0,2}(?:\s+Bis)?(?:\s?[-/#]\s?\d{1,5}[A-Za-z]{0,2})*(?:\s+(?:Sur|"
    r"Norte|Este|Oeste|bis|ter))?"
)
_POSTCODE = (
    r"(?:\d{5}-\d{3}|\d{4}-\d{3}"  # Brazil, Portugal
    r"|\d{5}(?:-\d{4})?"  # US, DE, FR, ES, IT, MX...
    r"|\d{3}\s\d{2}"  # CZ, SK, SE, GR
    r"|\d{2}-\d{3}"  # PL
    r"|\d{4}\s?[A-Z]{2}"  # NL
    r"|[A-Z]\d[A-Z]\s?\d[A-Z]\d"  # CA
    r"|[A-Z]{1,2}\d[A-Z\d]?\s*\d[A-Z]{2}"  # UK
    r"|[A-Z]-?\d{4}|[A-Z]\d{4}[A-Z]{3}"  # H-1669, AR
    r"|\d{6,7}"  # IN, RO, CL, CO, VN...
    r"|\d{4})"  # AT, CH, DK, NO, AU, NZ, ZA, BE, HU...
)
_UNIT = (
    r"(?:Apt|Apartment|Suite|Ste|Unit|Flat|Floor|Fl|Room|Piso|Dpto|Depto|Departamento|"
    r"Oficina|Of|Interior|Int|Edif|Local|Bodega|Casa|Piano|Appartamento|Scala|Ap|Bl|Sc|Et|"
    r"Lantai|Blok|Kav|Torre|Apto|Sala|Bloco|Lote|Casa|Bajo|Puerta)\.?\s*\w+"
)

_STREET = re.compile(
    r"(?:(?:Flat|Apt|Apartment|Unit|Suite|Room|H\.No\.|Plot)\s+[\w/-]+,?\s*)?"
    r"(?:"
    # 12 Main Indlela, 68/957, Chatterjee Path, 643 rang Desbiens
    rf"\b\d{{1,6}}[A-Za-z]?(?:/\d{{1,5}})*,?\s+(?:{_TYPE_BEFORE}\s+)?(?:{_NAME_WORDS}\s+)?{_TYPE_AFTER}\b\.?"
    rf"|\b\d{{1,6}}[A-Za-z]?(?:/\d{{1,5}})*,?\s+{_TYPE_BEFORE}\s+(?:{_LINK}\s+)?{_NAME_WORDS}"
    # Calle 93 #11-26, Carrera 24 # 23U-5 Este
    rf"|(?<![\w.]){_TYPE_BEFORE}\s+{_NUMBER}"
    # Calle de Alcalá 45, Jl. Siliwangi No. 05, Okrová 77 (then a postal code, see below)
    rf"|(?<![\w.]){_TYPE_BEFORE}\s+(?:{_LINK}\s+)?{_NAME_WORDS},?\s+{_NUMBER}\b"
    rf"|(?<![\w.]){_NAME_WORDS}(?:\s+{_TYPE_AFTER},?)?\s+{_NUMBER}\b"
    rf"|(?<![\w.]){_IN_WORD}\s+{_NUMBER}\b"
    # Contrada Danilo, 87 / rue Tristan Ribeiro / Intrarea Ene (a postal code must follow)
    rf"|(?<![\w.]){_TYPE_BEFORE}\s+(?:{_LINK}\s+)?{_NAME_WORDS}(?:,\s*{_NUMBER}\b)?"
    # 8 Denise Footway, 92347 Anna Extensions: a street type no list here knows (then a
    # town and a postal code must follow, see below)
    rf"|(?P<bare>\b\d{{1,6}}[A-Za-z]?\s+{_CAP}(?:\s+{_CAP}){{0,2}})"
    r")"
)
_PART = re.compile(
    r"(?:,\s*|\s+-\s+|\s+|\s*/\s*)"
    r"(?:"
    rf"{_UNIT}"
    rf"|(?:{_POSTCODE}\s+)?(?:{_LINK}\s+)?{_NAME_WORDS}(?:\s+{_LINK})?(?:\s+{_POSTCODE}\b|"
    rf"-\d{{6}}\b)?(?:\s+\([A-Z]{{2}}\))?"
    rf"|{_POSTCODE}\b"
    r"|[A-Z]{2,4}\s+(?:\d{5}(?:-\d{4})?|[A-Z]\d[A-Z]\s?\d[A-Z]\d)\b"
    r")"
)
_HAS_POSTCODE = re.compile(rf"(?<![\w-]){_POSTCODE}(?![\w-])|-\d{{6}}\b")
_STREET_TYPED = re.compile(
    rf"(?<![\w.])(?:{_TYPE_BEFORE})(?!\w)|\b{_TYPE_AFTER}\b|{_IN_WORD}|\d\s*/\s*\d"
)
MAX_PARTS = 6
# "Keizersgracht 123 1015 CJ Amsterdam": after a bare space, a postal code with its town
_SPACE_JOINED = re.compile(rf"\s+(?:{_UNIT}|{_POSTCODE}\s+{_CAP})")
DIGIT_RUN = re.compile(r"\d{3,}(?:[\s-]\d{3,}){2,}")


def find_world_addresses(text: str) -> list[Found]:
    found = []
    at = 0
    while m := _STREET.search(text, at):
        end, parts = m.end(), 0
        while parts < MAX_PARTS and (part := _PART.match(text, end)):
            # a bare space only joins a postal code or a unit, never the next sentence words
            if not part.group().startswith((",", " -", "/", " /")) and not _SPACE_JOINED.match(
                part.group()
            ):
                break
            end, parts = part.end(), parts + 1
        # three groups of three or more digits in a row are a card or a phone, not a street
        digit_run = DIGIT_RUN.search(text, m.start(), end)
        numbered = bool(re.search(r"\d", m.group()))
        typed = bool(_STREET_TYPED.search(m.group()))
        coded = bool(_HAS_POSTCODE.search(text, m.end(), end))
        # A street type and a number; a postal code after the street line; a typed street
        # with two more parts (a city and a region); a numbered one with three
        if m.group("bare") and not typed:
            # a number and capitalised words are a street only before a town and a code
            accepted = coded and parts >= 2 and not digit_run
        else:
            accepted = not digit_run and (
                (typed and numbered)
                or (coded and (numbered or typed))
                or (typed and parts >= 2)
                or (numbered and parts >= 3)
            )
        if accepted:
            found.append(Found(m.start(), end, "ADDRESS"))
            at = end
        else:
            at = m.start() + 1
    return found


# A name ending in one of these is a street's, not a person's ("Sukhumvit Road", "Zinnsvej").
_STREET_END = re.compile(
    r"\s(?:Street|Road|Avenue|Boulevard|Drive|Terrace|Crescent|Circlet|Parkway|Highway|Alley"
    r"|Lane|Square)\.?$|(?:straße|strasse|gasse|platz|allee|vej|gade|gatan|vägen|veien|vegen"
    r"|katu|ulica|utca)$"
)


def is_street_name(text: str) -> bool:
    return bool(_STREET_END.search(text))


# What may follow a street line and still be the address: postal codes with letters
# ("S49 4AZ", "V2T6P8"), numbers ("Piso 1", "222."), capitalised place words, region codes
# ("(MI)", "QC"), the linking words of place names ("Lenart v Slovenskih"). A lower-case word,
# or a full stop not followed by a number or comma, ends it.
_TAIL_SEP = r"(?:\s*,\s*|\s+-\s+|\s*/\s*|[ \t]+)"
_TAIL_TOKEN = (
    rf"(?:\d[^\W_]*(?:[-/][^\W_]+)*|N°|Nº|No\.|#|{_UP}[^\W_]*(?:[-'\u2019]+[^\W_]*)*"
    rf"|\({_UP}{{2,3}}\)|{_LINK}(?=\s+(?:{_UP}|\d|[^\W\d_]+\s*,))"
    # a lower-case word inside the tail, a comma and more of it after ("los bajos, CHIS")
    rf"|[^\W\d_]+(?=\s*,\s*(?:{_UP}|\d)))(?:\.(?=\s*[,\d]))?"
)
_TAIL = re.compile(rf"{_TAIL_SEP}{_TAIL_TOKEN}(?!\w)")
# The rest of a word the street line stopped inside ("S" of "S49 4AZ"), and an "Apto." dot
_RESUME = re.compile(r"(?<=\w)[^\W_]*(?:[-'\u2019]+[^\W_]+)*(?:\.(?=\s*[,\d]))?")


def extend_addresses(text: str, found: list[Found]) -> list[Found]:
    """Each ADDRESS carried on over the rest of its tail (city, region, postal code) up to
    the next other finding: a phone or e-mail after an address stays what it is."""
    stops = sorted(f.start for f in found if f.kind != "ADDRESS")
    out = []
    for f in found:
        if f.kind == "ADDRESS":
            limit = next((s for s in stops if s >= f.end), len(text))
            end = f.end
            if (rest := _RESUME.match(text, end, limit)) is not None:
                end = rest.end()
            while (part := _TAIL.match(text, end, limit)) is not None:
                end = part.end()
            f = Found(f.start, end, f.kind)
        out.append(f)
    return out
