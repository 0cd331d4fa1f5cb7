"""Writes sentences.jsonl: the labelled PII evaluation set (README.md beside it has the rules).

Sentences are built from templates whose slots carry their entity type, so every span offset
is computed, never counted by hand. A fixed seed keeps the file stable; rerun after editing:
`.venv/bin/python tests/ai/pii_eval/build_set.py`.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

HERE = Path(__file__).parent
SLOT = re.compile(r"\{(PERSON|EMAIL|PHONE|SSN|CREDIT_CARD|ADDRESS)\}")

PEOPLE = [
    # Chinese, Indian, Arabic, Hispanic, Nigerian, Slavic, Japanese, Korean, Vietnamese, others
    "Zhang Wei",
    "Li Na",
    "Wang Fang",
    "Chen Jing",
    "Liu Yang",
    "Huang Xiaoming",
    "Priya Raghunathan",
    "Arjun Mehta",
    "Lakshmi Venkataraman",
    "Rohit Sharma",
    "Ananya Iyer",
    "Sanjay Gupta",
    "Mohammed Al-Rashid",
    "Fatima Haddad",
    "Omar Farouk",
    "Layla Nasser",
    "Yousef Khalil",
    "Aisha Bello",
    "José García",
    "María Fernanda López",
    "Alejandro Ruiz",
    "Camila Rodríguez",
    "Diego Hernández",
    "Lucía Martínez",
    "Chukwuemeka Okafor",
    "Ngozi Adeyemi",
    "Oluwaseun Balogun",
    "Emeka Nwosu",
    "Funmilayo Adebayo",
    "Dmitri Volkov",
    "Katarzyna Nowak",
    "Oleksandr Shevchenko",
    "Milena Petrović",
    "Svetlana Ivanova",
    "Tomasz Kowalski",
    "Haruto Tanaka",
    "Yuki Sato",
    "Kenji Watanabe",
    "Kim Min-jun",
    "Park Ji-yeon",
    "Nguyen Van An",
    "Tran Thi Mai",
    "Emily Carter",
    "James O'Brien",
    "Sarah Thompson",
    "Michael Johnson",
    "Olivia Bennett",
    "Hans Müller",
    "Sophie Dubois",
    "Giulia Rossi",
    "Ingrid Johansson",
    "Kwame Mensah",
    "Thandiwe Dlamini",
    "Mehmet Yılmaz",  # noqa: RUF001 (Turkish dotless i)
    "Reza Tehrani",
    "Siobhan Murphy",
    "Rachel Goldberg",
]
EMAILS = [
    "priya.r@example.com",
    "j.garcia@correo.example.mx",
    "zhang.wei88@mail.example.cn",
    "ngozi_adeyemi@example.org",
    "d.volkov@example.ru",
    "billing+refunds@shop.example.co.uk",
    "emily.carter@university.example.edu",
    "omar.farouk@example.ae",
    "k.nowak@firma.example.pl",
    "tanaka.haruto@example.jp",
    "support-team@example.io",
    "o.balogun@example.com.ng",
]
PHONES = [
    "(415) 555-0132",
    "415-555-0198",
    "415.555.0147",
    "+1 212 555 0175",
    "1-800-555-0199",
    "+44 20 7946 0958",
    "020 7946 0321",
    "+49 30 901820",
    "+49 (0)89 1234567",
    "+81 3-1234-5678",
    "+91 98765 43210",
    "+234 803 123 4567",
    "+86 138 0013 8000",
    "+33 1 42 68 53 00",
    "+52 55 1234 5678",
    "+7 495 123-45-67",
    "+61 2 9374 4000",
    "(212)555-0143",
    "+971 4 123 4567",
    "+48 22 123 45 67",
]
SSNS = ["123-45-6789", "078-05-1120", "219-09-9999", "536-22-1847", "401-33-7265", "612 48 9035"]
CARDS = [
    "4111 1111 1111 1111",
    "5500-0000-0000-0004",
    "4012888888881881",
    "3782 822463 10005",
    "6011 1111 1111 1117",
    "5105 1051 0510 5100",
    "4242-4242-4242-4242",
    "3530 1113 3330 0000",
]
ADDRESSES = [
    "1600 Pennsylvania Avenue NW, Washington, DC 20500",
    "742 Evergreen Terrace, Springfield, IL 62704",
    "350 Fifth Avenue, New York, NY 10118",
    "221B Baker Street, London NW1 6XE",
    "10 Downing Street, London SW1A 2AA",
    "Flat 3, 45 Kensington High Street, London W8 5SA",
    "Hauptstraße 12, 10115 Berlin",
    "Friedrichstraße 123, 10117 Berlin, Germany",
    "Marienplatz 8, 80331 München",
    "1-2-3 Shibuya, Shibuya-ku, Tokyo 150-0002",
    "4-5-6 Umeda, Kita-ku, Osaka 530-0001",
    "P.O. Box 1234, Austin, TX 78701",
    "PO Box 567, Boise, ID 83702",
    "1234 Elm St Apt 5B, Portland, OR 97205",
    "88 Harbour Road, Wan Chai, Hong Kong",
    "12 Rue de Rivoli, 75004 Paris",
    "Calle de Alcalá 45, 28014 Madrid",
    "55 Marina Boulevard, Lagos 101241",
    "2500 Oak Ridge Drive, Suite 200, Raleigh, NC 27607",
    "9 Orchard Lane, Bristol BS1 5TR",
    "77 Massachusetts Ave, Cambridge, MA 02139",
    "501 W 4th St, Austin, TX 78701",
]

POSITIVE_TEMPLATES: dict[str, list[str]] = {
    "PERSON": [
        "My name is {PERSON} and I need help resetting my password.",
        "Please forward this report to {PERSON} before Friday.",
        "{PERSON} called yesterday about the late invoice.",
        "Can you write a thank-you note to {PERSON} for the interview?",
        "Dr. {PERSON} will see the patient at 3 pm.",
        "I met {PERSON} and {PERSON} at the conference in Lisbon.",
        "The lease was signed by {PERSON} last March.",
        "Hi, I'm {PERSON}, the new account manager.",
        "Summarise the complaint that {PERSON} sent us.",
        "Ask Ms. {PERSON} whether the shipment arrived.",
        "Translate this letter for my neighbour {PERSON}.",
        "Our CTO, {PERSON}, approved the budget.",
    ],
    "EMAIL": [
        "Send the receipt to {EMAIL} please.",
        "My e-mail is {EMAIL}; reply there.",
        "Contact {EMAIL} if the login fails again.",
        "Why does {EMAIL} keep bouncing?",
    ],
    "PHONE": [
        "Call me at {PHONE} after six.",
        "You can reach the front desk on {PHONE}.",
        "My mobile number is {PHONE}.",
        "Text {PHONE} when you land.",
        "The office line {PHONE} is busy all day.",
    ],
    "SSN": [
        "My social security number is {SSN}.",
        "SSN: {SSN}, please verify my identity.",
        "The form lists {SSN} as the applicant's SSN.",
    ],
    "CREDIT_CARD": [
        "Charge it to my card {CREDIT_CARD}, expiry 09/27.",
        "The card number is {CREDIT_CARD}.",
        "Why was {CREDIT_CARD} declined at checkout?",
    ],
    "ADDRESS": [
        "Ship the order to {ADDRESS}.",
        "I live at {ADDRESS} and the parcel never came.",
        "Our new office is at {ADDRESS}.",
        "Please update my billing address to {ADDRESS}.",
        "Mail the documents to {ADDRESS}, attention legal.",
    ],
}
MIXED_TEMPLATES = [
    "Hi, this is {PERSON}; call me on {PHONE} or write to {EMAIL}.",
    "{PERSON} moved to {ADDRESS} last month.",
    "Customer {PERSON}, SSN {SSN}, disputes a charge on {CREDIT_CARD}.",
    "Deliver to {PERSON}, {ADDRESS}, phone {PHONE}.",
    "Update the record for {PERSON}: e-mail {EMAIL}, mobile {PHONE}.",
    "Please send a copy to {PERSON} at {EMAIL}.",
]

# Hard negatives: no PII by the labelling rules (README.md), but close to what detectors match.
NEGATIVES = [
    "I want the new Jordan sneakers in size 10.",
    "Is the Ford Mustang more reliable than the Tesla Model 3?",
    "Compare the Dell XPS 13 with the MacBook Air.",
    "How do I cook Wellington beef for six people?",
    "What is the capital of Nigeria?",
    "The meeting moved to 2024-03-15 at 10:30.",
    "Our order number is 4839-2210-7765 and it is still pending.",
    "Upgrade from version 3.12.4 to 3.13.0 broke the build.",
    "The tracking code 1Z999AA10123456784 shows no movement.",
    "This 16-digit reference 1234 5678 9012 3456 is not a card number.",
    "Reference 4111 1111 1111 1112 failed the checksum.",
    "The invoice total is $12,450.99 due on 06/30/2025.",
    "Flights from London to Tokyo are cheaper in November.",
    "Paris in spring is lovely; Berlin is colder.",
    "Explain the difference between TCP and UDP.",
    "Write a haiku about autumn leaves.",
    "Sort this list: 42, 17, 99, 3, 58.",
    "The Amazon river is longer than the Mississippi.",
    "Lincoln Logs were my favourite toy as a kid.",
    "Microsoft Teams crashed during the demo.",
    "Set the timeout to 30000 ms and retry 3 times.",
    "Error code 0x80070005 appears when I install the update.",
    "The ISBN of the book is 978-3-16-148410-0.",
    "My IP address is 192.168.1.25 on the office network.",
    "Chapter 11 covers the years 1914 to 1918.",
    "What does HTTP status 429 mean?",
    "Convert 98.6 degrees Fahrenheit to Celsius.",
    "The Boeing 747-400 has four engines.",
    "Washington State has strict data laws.",
    "Victoria Falls is on the Zambezi river.",
    "Our Q3 revenue grew 14% to 2.3 million euros.",
    "The patch note says: fixed bug #48213 in the parser.",
    "Mix 200 g flour, 3 eggs and 250 ml milk.",
    "The SKU 100-200-3000 is out of stock.",
    "Run pip install numpy==2.1.0 in the container.",
    "The Jordan river flows into the Dead Sea.",
    "I love Ben & Jerry's ice cream.",
    "The Hilton in Dubai has a rooftop pool.",
    "Big Ben was covered in scaffolding for years.",
    "Which is faster, the Porsche Taycan or the Lucid Air?",
    "Account 000123 was archived in 2019.",
    "Please summarise the attached quarterly report.",
    "Why is the sky blue?",
    "Give me three ideas for a birthday party.",
    "The Toyota Camry 2021 gets 32 mpg on the highway.",
    "Kubernetes 1.29 removed the old flow control API.",
    "The train leaves platform 9 at 14:05.",
    "Room 404 is on the fourth floor.",
    "The temperature dropped to -5 °C overnight.",
    "Mercedes-Benz unveiled a new electric sedan.",
    "Grace Hopper Celebration tickets sold out.",
    "The Mayo Clinic publishes guides on sleep.",
    "Stanford University and Oxford both offer the course.",
    "Is Chase Bank open on Sundays?",
    "Try the Caesar salad with extra parmesan.",
    "Apple released iOS 18.2 yesterday.",
    "The part number is ZX-4410-B and it ships in 2 days.",
    "Latitude 51.5074, longitude -0.1278 is central London.",
    "The vote passed 312 to 118.",
    "My password must have 12 characters.",
    "Dial 911 in an emergency.",
    "The warranty lasts 24 months from 01/02/2023.",
    "Our ticket PROJ-1234 tracks the regression.",
    "The hash is 5f4dcc3b5aa765d61d8327deb882cf99.",
    "Tokyo, Osaka and Kyoto are on the itinerary.",
    "Main Street is closed for the parade.",
    "Bake at 180 degrees for 25 minutes.",
    "The population of Lagos is over 15 million.",
    "Send 3 units of item 5500 to the warehouse.",
    "The serial number 4929 0000 0000 0001 is invalid.",
    "Monday's stand-up is cancelled.",
    "Review the pull request before the 5 pm deadline.",
    "The quick brown fox jumps over the lazy dog.",
    "What is 1234567 times 89?",
    "The library closes at 9 on weekdays.",
    "Nike Air Max and Adidas Ultraboost are both on sale.",
    "The Shakespeare festival opens in July.",
    "Read chapter 3 of the Python tutorial.",
    "Lambda functions time out after 900 seconds.",
    "The GDPR fine was 20 million euros.",
]
NEGATIVE_TEMPLATES = [
    "Order {n} shipped on {d}.",
    "Build {v} passed all {k} tests.",
    "Ticket {n} was closed on {d}.",
    "The batch {n} contains {k} items.",
    "Release {v} is scheduled for {d}.",
]


POOLS = {
    "PERSON": PEOPLE,
    "EMAIL": EMAILS,
    "PHONE": PHONES,
    "SSN": SSNS,
    "CREDIT_CARD": CARDS,
    "ADDRESS": ADDRESSES,
}


def fill(template: str, rng: random.Random, first: str | None = None) -> dict[str, object]:
    """The sentence with its slots filled (the first one with `first` when given), and the
    span of each slot's value."""
    spans: list[dict[str, object]]
    text, spans, last = "", [], 0
    for match in SLOT.finditer(template):
        text += template[last : match.start()]
        kind = match.group(1)
        value = first if first is not None and not spans else rng.choice(POOLS[kind])
        spans.append({"start": len(text), "end": len(text) + len(value), "type": kind})
        text += value
        last = match.end()
    text += template[last:]
    return {"text": text, "spans": spans}


def negative_from_template(template: str, rng: random.Random) -> dict[str, object]:
    text = template.format(
        n=f"#{rng.randint(10000, 99999)}",
        d=f"{rng.randint(2019, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        v=f"{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}",
        k=rng.randint(2, 900),
    )
    return {"text": text, "spans": []}


def build() -> list[dict[str, object]]:
    rng = random.Random(10)
    rows = []
    # Every value of every pool once, the templates taken in turn; the short pools twice.
    for kind, templates in POSITIVE_TEMPLATES.items():
        values = POOLS[kind] * (2 if len(POOLS[kind]) < 10 else 1)
        for i, value in enumerate(values):
            rows.append(fill(templates[i % len(templates)], rng, first=value))
    for template in MIXED_TEMPLATES:
        for _ in range(4):
            rows.append(fill(template, rng))
    rows.extend({"text": text, "spans": []} for text in NEGATIVES)
    for template in NEGATIVE_TEMPLATES:
        for _ in range(16):
            rows.append(negative_from_template(template, rng))
    unique = {json.dumps(row, ensure_ascii=False): row for row in rows}
    return list(unique.values())


def main() -> None:
    rows = build()
    with (HERE / "sentences.jsonl").open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    positives = sum(1 for row in rows if row["spans"])
    print(f"{len(rows)} sentences, {positives} with PII")


if __name__ == "__main__":
    main()
