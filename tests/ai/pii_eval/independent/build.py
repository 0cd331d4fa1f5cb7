# ruff: noqa: E501  (the sentences and value makers read best one per line)
"""Writes sentences.jsonl: the independent PII evaluation set (README.md beside it).

Values come from Faker (names, addresses, phone numbers, e-mails, SSNs, cards, and the
confusers of the hard negatives: companies, cities, streets without a number, dates...) across
the locales of LOCALES; sentence shapes are this file's templates and hand-written sentences
(`[[value|TYPE]]` marks a span). Nothing here reads the redactor's code or lists.

Split: HELDOUT_SHARE of the templates of each stratum (the rarest kind a template holds) and
of the hand-written sentences are drawn into `heldout` once (seeded), the rest is `tune`: so
held-out sentences have shapes tuning never saw, and their Faker values are fresh draws. Rerun after editing (the seeds keep the file stable):
`.venv/bin/python tests/ai/pii_eval/independent/build.py`.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path

from faker import Faker

HERE = Path(__file__).parent
SEED = 2022
HELDOUT_SHARE = 0.4
INSTANCES_PER_TEMPLATE = 36
INSTANCES_PER_NEGATIVE_TEMPLATE = 10

# Latin-script names in every locale (ja_JP and zh_CN romanised). ORDER: the family name first.
LOCALES = [
    "en_US", "en_GB", "en_IN", "en_AU", "en_NZ", "en_IE", "yo_NG", "zu_ZA", "de_DE", "de_AT",
    "de_CH", "fr_FR", "fr_CA", "es_ES", "es_MX", "es_AR", "es_CL", "es_CO", "pt_BR", "pt_PT",
    "it_IT", "pl_PL", "nl_NL", "sv_SE", "no_NO", "da_DK", "fi_FI", "cs_CZ", "sk_SK", "hr_HR",
    "sl_SI", "ro_RO", "hu_HU", "tr_TR", "vi_VN", "id_ID", "ja_JP", "zh_CN",
]  # fmt: skip
FAMILY_FIRST = {"hu_HU", "vi_VN"}
EITHER_ORDER = {"ja_JP", "zh_CN"}
# Faker's addresses for these locales are US-shaped or not in Latin script: never drawn.
NO_ADDRESS = {"en_IE", "yo_NG", "tr_TR", "ja_JP", "zh_CN"}
TITLES = ["Dr.", "Mr.", "Ms.", "Mrs.", "Prof.", "Dr"]

PII_TEMPLATES = [
    "Please send the contract to {NAME} by Thursday.",
    "{NAME} called twice about the refund and is still waiting.",
    "Can you draft a short apology to {NAME} for the delayed delivery?",
    "I had lunch with {NAME} and {NAME} yesterday.",
    "The package for {NAME} should go to {ADDRESS}.",
    "Our new office is at {ADDRESS}; visitors sign in at reception.",
    "Ship the replacement to {ADDRESS} and text {PHONE} when it leaves.",
    "You can reach me on {PHONE} after 6 pm.",
    "Her mobile is {PHONE}, his is {PHONE}.",
    "Contact: {NAME}, {PHONE}, {EMAIL}",
    "From: {NAME} <{EMAIL}>\nSubject: invoice {ID}\n\nHi, the invoice is attached.",
    "Forward the minutes to {EMAIL} and cc {EMAIL}.",
    "My SSN is {SSN} and my date of birth is {DATE}.",
    "The applicant ({NAME}, SSN {SSN}) works as a {JOB}.",
    "Charge the card {CARD} for the {COMPANY} order.",
    "Card number: {CARD}, expiry 09/29.",
    "Write a recommendation letter for {NAME}, who worked with us as a {JOB}.",
    "Is it rude to ask {GIVEN} about her salary?",
    "I think {GIVEN} forgot the keys at {COMPANY} again.",
    "Meeting notes - attendees: {NAME}, {NAME}, {NAME}.",
    "Summarise this complaint from {NAME} about the noise at {ADDRESS}.",
    "Translate into French: 'Dear {NAME}, thank you for your order.'",
    "{TITLE} {SURNAME} will review the scan on {DATE}.",
    "Tell {TITLE} {SURNAME} that the lab results are ready.",
    "Remind me to call {GIVEN} at {PHONE} tomorrow.",
    "The tenant at {ADDRESS} has not paid since {DATE}.",
    "Update the delivery address to {ADDRESS}, please.",
    "Who is {NAME}? She emailed me from {EMAIL} asking for a quote.",
    "A note to {NAME}: the server migration is on {DATE}.",
    "This is a reminder for {NAME} regarding ticket {ID}.",
    "Regards,\n{NAME}\n{JOB}, {COMPANY}\n{PHONE}",
    "{NAME}'s flight was cancelled; rebook her on the next one.",
    "According to {NAME}, the budget was approved in {CITY}.",
    "I'm writing on behalf of {NAME}, who lives at {ADDRESS}.",
    "Customer {NAME} (phone {PHONE}) reported a fault with order {ID}.",
    "Please verify the identity of {NAME} before releasing the records.",
    "We interviewed {NAME} for the {JOB} role; next step is a call with {NAME}.",
    "name: {NAME}\nemail: {EMAIL}\nphone: {PHONE}\naddress: {ADDRESS}",
    "Can {GIVEN} and {GIVEN} share a room at the {CITY} offsite?",
    "Payment from {NAME} with card {CARD} was declined.",
    "Send the keys by courier to {NAME}, {ADDRESS}.",
    "Is {ADDRESS} in a flood zone?",
    "How long does it take to walk from {ADDRESS} to the station?",
    "my neighbour {NAME} keeps parking in front of my garage",
    "hey can u ask {GIVEN} to ping me on {PHONE}",
    "Thanks to {NAME} and the whole {COMPANY} team for the support.",
    "The will names {NAME} as executor and {NAME} as beneficiary.",
    "Book a table for four under the name {NAME}.",
    "Hello, my name is {NAME} and I have a question about my account.",
    "Dear {TITLE} {SURNAME},\nYour appointment is confirmed for {DATE}.",
    "Invite {EMAIL} to the shared drive.",
    "Our records show {SSN} belongs to a different customer.",
    "Draft a birthday message for {GIVEN}, she is turning forty.",
    "The courier left the parcel with {NAME} next door.",
    "Add {NAME} ({EMAIL}) to the distribution list.",
    "Can you check if {PHONE} is a mobile or a landline?",
    "Rewrite this more politely: '{GIVEN}, you missed the deadline again.'",
    "Compare rents near {ADDRESS} with the {CITY} average.",
    "Emergency contact: {NAME}, {PHONE}.",
    "Between {NAME} and {NAME}, who should lead the {COMPANY} account?",
]

NEGATIVE_TEMPLATES = [
    "What is the population of {CITY}?",
    "Write a product description for {COMPANY}'s new line of kettles.",
    "How do I get from {CITY} to {CITY} by train?",
    "Is {STREET} usually busy on Saturday mornings?",
    "The quarterly report for {COMPANY} is due on {DATE}.",
    "Order {ID} was shipped on {DATE} and should arrive within a week.",
    "Our server at {IP} returned 503 for an hour.",
    "The ISBN of the book is {ISBN}.",
    "Barcode {EAN} does not scan at the till.",
    "Request {UUID} failed with a timeout.",
    "Is {COUNTRY} a member of the OECD?",
    "We are hiring a {JOB} in {CITY}.",
    "Compare {COMPANY} and {COMPANY} on revenue growth.",
    "The conference moves from {CITY} to {CITY} next year.",
    "The total was {PRICE} including tax.",
    "Ticket {ID} was reopened after the fix in version {VERSION}.",
    "Roadworks on {STREET} will last until {DATE}.",
    "Explain the tax rules for freelancers in {COUNTRY}.",
    "{COMPANY} reported a loss of {PRICE} million last quarter.",
    "What time zone is {CITY} in?",
    "The invoice number is {ID} and the amount is {PRICE}.",
    "Upgrade the cluster to {VERSION} before {DATE}.",
    "Plan a three-day trip to {CITY} with a budget of {PRICE}.",
    "The {COMPANY} warehouse on {STREET} is closed for inventory.",
    "Is the flight from {CITY} to {COUNTRY} usually delayed?",
    "Our {JOB} left for {COMPANY} last month.",
    "The build {UUID} passed all checks at {TIME}.",
    "Route 66 and {STREET} are both closed after the storm.",
    "Give me a summary of {COMPANY}'s annual report.",
    "Schedule the maintenance window for {DATE} at {TIME} UTC.",
    "Parcel tracking number {TRACKING} shows 'in transit'.",
    "The license plate {PLATE} was caught by the speed camera on {STREET}.",
    "Which museums in {CITY} are free on Sundays?",
    "Reserve meeting room 4B for {DATE}.",
    "Our office in {CITY} closes at {TIME} on Fridays.",
]

# Hand-written: names and addresses in positions and forms the templates do not cover.
HAND_WRITTEN = [
    ("vi_VN", "Please pass this to [[Nguyễn Thị Lan|PERSON]] in accounting."),
    ("vi_VN", "I spoke with [[Tran Van Minh|PERSON]] and [[Le Thi Hoa|PERSON]] this morning."),
    ("vi_VN", "[[Phạm Minh Tuấn|PERSON]] is the new site manager in Da Nang."),
    ("vi_VN", "Send it to [[Hoang Duc Anh|PERSON]], 25 Ly Thuong Kiet, Hoan Kiem, Hanoi."),
    ("zh_CN", "A note to [[Wang Xiaoling|PERSON]] about the lease renewal."),
    ("zh_CN", "[[Xiaoling Wang|PERSON]] will sign on behalf of the buyer."),
    ("zh_CN", "Ask [[Zhou Jielun|PERSON]] whether the samples reached Shenzhen."),
    ("zh_CN", "The account was opened by [[Jianguo Liu|PERSON]] in 2019."),
    ("zh_CN", "Interview feedback for [[Li Mingzhu|PERSON]] is due today."),
    ("zh_CN", "Deliver to [[Room 1203, 88 Century Avenue, Pudong, Shanghai 200120|ADDRESS]]."),
    ("ja_JP", "My address is [[2-8-1 Nishi-Shinjuku, Shinjuku-ku, Tokyo 163-8001|ADDRESS]]."),
    ("ja_JP", "Mail it to [[3-chōme-5-2 Kita-Aoyama, Minato-ku, Tokyo|ADDRESS]] please."),
    ("ja_JP", "The clinic is at [[1 Chome-1-2 Oshiage, Sumida City, Tokyo 131-0045|ADDRESS]]."),
    ("ja_JP", "Thank [[Sato Haruki|PERSON]] for translating the manual."),
    ("ja_JP", "[[Haruki Sato|PERSON]] and [[Aiko Nakamura|PERSON]] joined the call late."),
    (
        "th_TH",
        "Our guesthouse is at [[12/3 Soi Sukhumvit 11, Khlong Toei Nuea, Watthana, Bangkok 10110|ADDRESS]].",
    ),
    ("th_TH", "Please deliver to [[99 Soi Ari 4, Phaya Thai, Bangkok 10400|ADDRESS]]."),
    (
        "th_TH",
        "The shop moved to [[45/7 Moo 3, Tambon Chang Phueak, Mueang Chiang Mai 50300|ADDRESS]].",
    ),
    ("th_TH", "Can [[Somchai Wongsawat|PERSON]] confirm the booking?"),
    ("th_TH", "Invoice for [[Kanokwan Srisuk|PERSON]], paid in cash."),
    (
        "en_IN",
        "Courier to [[Flat 402, Shanti Apartments, 14th Cross, Indiranagar, Bengaluru 560038|ADDRESS]].",
    ),
    ("en_IN", "He lives at [[B-17, Sector 62, Noida, Uttar Pradesh 201309|ADDRESS]]."),
    (
        "en_IN",
        "Our Mumbai office: [[3rd Floor, Raheja Towers, Bandra Kurla Complex, Mumbai 400051|ADDRESS]].",
    ),
    ("en_IN", "Please call [[Venkatesh Subramanian|PERSON]] before noon."),
    (
        "en_IN",
        "Forward the offer letter to [[Deepika Chatterjee|PERSON]] and [[Harpreet Singh Gill|PERSON]].",
    ),
    ("pt_BR", "Entrega em [[Av. Paulista, 1578 - Bela Vista, São Paulo - SP, 01310-200|ADDRESS]]."),
    ("es_CO", "Send the documents to [[Calle 93 #11-26, Chapinero, Bogotá|ADDRESS]]."),
    (
        "es_MX",
        "The warehouse is at [[Av. Insurgentes Sur 1602, Col. Crédito Constructor, 03940 Ciudad de México|ADDRESS]].",
    ),
    ("es_AR", "Mi dirección es [[Av. Corrientes 1234, Piso 5, C1043 Buenos Aires|ADDRESS]]."),
    ("es_CL", "Ask [[Ignacio Fuentealba|PERSON]] to sign for it at the front desk."),
    (
        "en_US",
        "How far is [[1600 Pennsylvania Avenue NW, Washington, DC 20500|ADDRESS]] from the hotel?",
    ),
    ("en_GB", "Write to me at [[10 Downing Street, London SW1A 2AA|ADDRESS]]."),
    ("en_GB", "Is [[221B Baker Street|ADDRESS]] open to visitors?"),
    ("en_US", "We stayed near [[350 Fifth Avenue, New York, NY 10118|ADDRESS]] last summer."),
    ("fr_FR", "Le colis est au [[55 rue du Faubourg Saint-Honoré, 75008 Paris|ADDRESS]]."),
    (
        "sv_SE",
        "Please thank [[Björn Lindqvist|PERSON]] and [[Sigrid Åkesson|PERSON]] for hosting us.",
    ),
    ("no_NO", "The report was written by [[Håkon Østby|PERSON]]."),
    ("fi_FI", "Set up a call with [[Aino Mäkelä|PERSON]] next week."),
    ("da_DK", "[[Søren Kierkegaard-Nielsen|PERSON]] asked for a copy of the lease."),
    ("pl_PL", "A note to [[Wojciech Brzęczyszczykiewicz|PERSON]] about the overtime."),
    ("cs_CZ", "Include [[Jiří Dvořák|PERSON]] in the thread."),
    ("uk_UA", "[[Oksana Hnatyshyn|PERSON]] needs access to the finance folder."),
    ("ru_RU", "Give the badge to [[Yekaterina Smirnova|PERSON]] at the entrance."),
    ("hr_HR", "We owe [[Zvonimir Božić|PERSON]] two days of leave."),
    ("yo_NG", "Please send the keys to [[Adebayo Ogunleye|PERSON]] at the front gate."),
    ("yo_NG", "Forward this to [[Chidinma Eze|PERSON]]; she handles refunds."),
    ("yo_NG", "The new clinic is at [[14 Adeola Odeku Street, Victoria Island, Lagos|ADDRESS]]."),
    ("en_GH", "A note to [[Kofi Boateng|PERSON]] and [[Ama Serwaa|PERSON]] about the audit."),
    ("en_SN", "[[Mamadou Diallo|PERSON]] reviewed the shipping manifest."),
    ("en_SN", "Ask [[Aminata Traoré|PERSON]] for the signed copy."),
    ("ar_AA", "Book a car for [[Youssef El-Amrani|PERSON]] from the airport."),
    ("ko_KR", "Thank you note to [[Park Seo-yeon|PERSON]] for the referral."),
    ("en_US", "if you see [[jake morrison|PERSON]] tell him the car is ready"),
    ("en_US", "email from [[maria gonzalez|PERSON]] says the shipment is late"),
    ("en_US", "Lunch with [[Alex|PERSON]] moved to Friday."),
    ("en_US", "I told [[Bob|PERSON]] the numbers were wrong."),
    ("en_GB", "Cheers, [[Olly|PERSON]]"),
    ("de_DE", "Bitte an Frau [[Schneider|PERSON]] weiterleiten."),
    ("en_US", "The signature reads '[[J. R. Whitfield|PERSON]]'."),
    ("en_US", "[[O'Connor|PERSON]], [[Siobhan|PERSON]] - seat 14C."),
    ("en_US", "Patient: [[WILLIAMS, Karen|PERSON]] DOB 04/11/1972"),
    ("en_US", "My home address is [[4417 W 28th St Apt 3, Chicago IL 60623|ADDRESS]]."),
    ("en_US", "Drop it at [[PO Box 7721, Boise, ID 83707|ADDRESS]]."),
    ("de_DE", "Unsere Adresse: [[Friedrichstraße 43-45, 10117 Berlin|ADDRESS]]."),
    ("nl_NL", "Het kantoor zit op [[Keizersgracht 123, 1015 CJ Amsterdam|ADDRESS]]."),
    ("it_IT", "Please invoice [[Via Roma 12, 20121 Milano MI|ADDRESS]]."),
    ("id_ID", "Kirim ke [[Jl. Sudirman No. 25, Jakarta Pusat 10220|ADDRESS]]."),
    ("en_PH", "Deliver to [[Unit 5B, 123 Ayala Avenue, Makati City 1226|ADDRESS]]."),
    ("en_SG", "Our Singapore office: [[1 Raffles Place, #20-01, Singapore 048616|ADDRESS]]."),
    ("en_AU", "The rental is at [[Unit 4/27 Smith St, Fitzroy VIC 3065|ADDRESS]]."),
]
HAND_NEGATIVES = [
    "The Ford Foundation funds the programme.",
    "We flew into Charles de Gaulle and out of John F. Kennedy International.",
    "Victoria Falls is on the border of Zambia and Zimbabwe.",
    "The Mayo Clinic and Johns Hopkins both rank highly.",
    "Is Dr Pepper sold in Japan?",
    "I bought new Dr. Martens boots and a Louis Vuitton bag.",
    "Tommy Hilfiger and Calvin Klein outlets are on the ground floor.",
    "Hotel Marriott Courtyard has a shuttle to the airport.",
    "Wells Fargo and Morgan Stanley reported earnings today.",
    "The Mercedes-Benz Arena hosts the final.",
    "Lake Victoria is the largest lake in Africa.",
    "St. Petersburg is beautiful in June.",
    "Our team uses Jenkins, Ansible and Grafana.",
    "The Ada Lovelace building is next to the Turing lab.",
    "San Francisco and San Diego are both in California.",
    "The Nelson Mandela Bay stadium was full.",
    "We met at the Ritz-Carlton in Doha.",
    "Jordan and Lebanon share a long history.",
    "Try the Margherita pizza at the place on Via Veneto.",
    "The Golden Gate Bridge is closed to pedestrians tonight.",
    "Chanel No. 5 is on sale this week.",
    "Avenida Paulista gets crowded on Sundays.",
    "Sukhumvit Road has heavy traffic at rush hour.",
    "Shibuya Crossing is busiest at 6 pm.",
    "The Washington Post and the Boston Globe covered it.",
    "Kia Sorento or Hyundai Santa Fe, which is better?",
    "Version 2.14.3 fixes the memory leak in the parser.",
    "Call 911 in an emergency, or 112 in Europe.",
    "Gate B22, boarding at 14:35, seat 23A.",
    "The recipe needs 250 g of flour and 2 eggs.",
    "Room 101, Building 7, is reserved for the workshop.",
    "Store 4417 reported sales of 18,250 units.",
    "The ticket number is 4000-1234-5678-9011 in our old system.",
    "Use port 8443 and the subnet 10.20.0.0/16.",
    "Temperature reached 38.6 degrees in Seville.",
    "Add 5 ml of the solution every 12 hours.",
    "Meet me at Starbucks on Queen Street.",
    "Windows 11 and macOS Sonoma both support it.",
    "The Pacific Ocean covers a third of the planet.",
    "Is Amazon Prime available in Vietnam?",
]

NAME_SLOTS = {"NAME": "PERSON", "GIVEN": "PERSON", "SURNAME": "PERSON"}
PII_SLOTS = {
    **NAME_SLOTS, "ADDRESS": "ADDRESS", "PHONE": "PHONE", "EMAIL": "EMAIL", "SSN": "SSN",
    "CARD": "CREDIT_CARD",
}  # fmt: skip
SLOT = re.compile(r"\{([A-Z]+)\}")
MARK = re.compile(r"\[\[(.+?)\|([A-Z_]+)\]\]")


class Values:
    """Faker values for one locale (a confuser filler never comes out as PII)."""

    def __init__(self, locale: str, seed: int) -> None:
        self.locale = locale
        self.fake = Faker(locale)
        self.fake.seed_instance(seed)
        self.en = Faker("en_US")
        self.en.seed_instance(seed)
        self.rng = random.Random(seed)

    def given(self) -> str:
        if self.locale == "vi_VN":
            return self.rng.choice([self.fake.first_name_male, self.fake.first_name_female])()
        if self.locale in {"ja_JP", "zh_CN"}:
            return str(self.fake.first_romanized_name())
        return str(self.fake.first_name())

    def family(self) -> str:
        if self.locale in {"ja_JP", "zh_CN"}:
            return str(self.fake.last_romanized_name())
        return str(self.fake.last_name())

    def name(self) -> str:
        given, family = self.given(), self.family()
        if self.locale == "vi_VN":
            return f"{family} {self.fake.middle_name()} {given}"
        if self.locale in FAMILY_FIRST or (self.locale in EITHER_ORDER and self.rng.random() < 0.5):
            return f"{family} {given}"
        return f"{given} {family}"

    def address(self) -> str:
        return re.sub(r"\s*\n\s*", ", ", str(self.fake.address())).strip()

    def phone(self) -> str:
        return str(self.fake.phone_number())

    def card(self) -> str:
        digits = str(self.en.credit_card_number())
        style = self.rng.choice(["plain", "space", "dash"])
        if style == "plain" or len(digits) != 16:
            return digits
        sep = " " if style == "space" else "-"
        return sep.join(digits[i : i + 4] for i in range(0, 16, 4))

    def fill(self, slot: str) -> str:
        fake, en = self.fake, self.en
        makers: dict[str, Callable[[], str]] = {
            "NAME": self.name,
            "GIVEN": self.given,
            "SURNAME": self.family,
            "TITLE": lambda: self.rng.choice(TITLES),
            "ADDRESS": self.address,
            "PHONE": self.phone,
            "EMAIL": lambda: str(fake.email()),
            "SSN": lambda: str(en.ssn()),
            "CARD": self.card,
            "COMPANY": lambda: str(fake.company()),
            "CITY": lambda: str(fake.city()),
            "COUNTRY": lambda: str(en.country()),
            "STREET": lambda: str(fake.street_name()),
            "DATE": lambda: str(fake.date(pattern=self.rng.choice(["%d %B %Y", "%Y-%m-%d"]))),
            "TIME": lambda: str(en.time(pattern="%H:%M")),
            "JOB": lambda: str(en.job()).lower(),
            "ID": lambda: str(en.bothify(self.rng.choice(["ORD-####-??", "#######", "INV-2024-#####"]))),
            "ISBN": lambda: str(en.isbn13()),
            "EAN": lambda: str(en.ean13()),
            "UUID": lambda: str(en.uuid4()),
            "IP": lambda: str(en.ipv4_private()),
            "PRICE": lambda: f"{self.rng.uniform(3, 9000):,.2f} EUR",
            "VERSION": lambda: f"{self.rng.randint(1, 9)}.{self.rng.randint(0, 30)}.{self.rng.randint(0, 9)}",
            "TRACKING": lambda: str(en.bothify("1Z###???##########").upper()),
            "PLATE": lambda: str(fake.license_plate()),
        }  # fmt: skip
        return makers[slot]()


def from_template(template: str, values: Values) -> dict[str, object]:
    text, spans, last = "", [], 0
    for m in SLOT.finditer(template):
        text += template[last : m.start()]
        value = values.fill(m.group(1))
        kind = PII_SLOTS.get(m.group(1))
        if kind:
            spans.append({"start": len(text), "end": len(text) + len(value), "type": kind})
        text += value
        last = m.end()
    text += template[last:]
    return {"text": text, "spans": spans}


def from_marks(marked: str) -> dict[str, object]:
    text, spans, last = "", [], 0
    for m in MARK.finditer(marked):
        text += marked[last : m.start()]
        spans.append({"start": len(text), "end": len(text) + len(m.group(1)), "type": m.group(2)})
        text += m.group(1)
        last = m.end()
    return {"text": text + marked[last:], "spans": spans}


def stratum(template: str) -> str:
    """The rarest kind a template holds: the split is drawn within each, so every kind has
    held-out sentences."""
    slots = set(SLOT.findall(template))
    for slot in ("SSN", "CARD", "EMAIL", "PHONE", "ADDRESS", "SURNAME", "GIVEN", "NAME"):
        if slot in slots:
            return slot
    return "negative"


def heldout_templates(rng: random.Random) -> set[str]:
    """HELDOUT_SHARE of the templates of each stratum (at least one), drawn with `rng`."""
    held: set[str] = set()
    strata: dict[str, list[str]] = {}
    for template in PII_TEMPLATES + NEGATIVE_TEMPLATES:
        strata.setdefault(stratum(template), []).append(template)
    for members in strata.values():
        rng.shuffle(members)
        held.update(members[: max(1, round(HELDOUT_SHARE * len(members)))])
    return held


def build() -> list[dict[str, object]]:
    rng = random.Random(SEED)
    held = heldout_templates(rng)
    rows: list[dict[str, object]] = []
    for number, template in enumerate(PII_TEMPLATES + NEGATIVE_TEMPLATES):
        part = "heldout" if template in held else "tune"
        negative = number >= len(PII_TEMPLATES)
        count = INSTANCES_PER_NEGATIVE_TEMPLATE if negative else INSTANCES_PER_TEMPLATE
        # Faker's addresses of some locales are not theirs: those sit out address templates.
        locales = [c for c in LOCALES if "{ADDRESS}" not in template or c not in NO_ADDRESS]
        for i in range(count):
            locale = locales[(number * 7 + i) % len(locales)]
            values = Values(locale, SEED * 100_000 + number * 100 + i)
            row = from_template(template, values)
            source = f"{'negative' if negative else 'template'}:{number}"
            rows.append({**row, "locale": locale, "source": source, "split": part})
    # Hand-written sentences: each drawn on its own.
    split = lambda: "heldout" if rng.random() < HELDOUT_SHARE else "tune"  # noqa: E731
    for number, (locale, marked) in enumerate(HAND_WRITTEN):
        rows.append(
            {**from_marks(marked), "locale": locale, "source": f"hand:{number}", "split": split()}
        )
    for number, text in enumerate(HAND_NEGATIVES):
        rows.append({"text": text, "spans": [], "locale": "none", "source": f"hand-negative:{number}", "split": split()})  # fmt: skip
    return rows


def main() -> None:
    rows = build()
    with (HERE / "sentences.jsonl").open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    spans = sum(len(r["spans"]) for r in rows)  # type: ignore[arg-type, misc]
    negatives = sum(1 for r in rows if not r["spans"])
    held = [r for r in rows if r["split"] == "heldout"]
    held_spans = sum(len(r["spans"]) for r in held)  # type: ignore[arg-type, misc]
    print(f"{len(rows)} sentences, {spans} PII spans, {negatives} without PII;")
    print(f"held out: {len(held)} sentences, {held_spans} spans, "
          f"{sum(1 for r in held if not r['spans'])} without PII")  # fmt: skip


if __name__ == "__main__":
    main()
