"""Writes pairs.jsonl: the labelled pair set of the semantic cache (README.md beside it).

Each *intent* below is one request written by hand in two to four wordings that ask the same
thing, with typed slots (a ticket number, a person, a city, a date, an amount and its unit).
Slot values come from Faker (many locales) and from hand-written lists. From one filling of
an intent's slots:
- a **paraphrase** pair (label `hit`): two different wordings, the same slot values;
- a **near miss** (label `miss`): the same wording (or, one time in three, another wording),
  one slot value changed; its category is the slot's kind.
Negation and swapped subject/object pairs are written whole by hand (lists at the end), with
Faker names filled into some of the swaps.

The split is by intent (`split`: `tune` or `heldout`, a fixed seeded draw of 40% of the
intents, and 40% of each list of hand-written pairs): no wording of a held-out pair is ever seen while
tuning. A fixed seed (and hash seed: it re-executes itself with PYTHONHASHSEED=0)
keeps the file stable; rerun after editing:
`.venv/bin/python tests/ai/cache_eval/build_pairs.py`.
"""

# ruff: noqa: E501 (lists of pairs read best one pair to a line)
from __future__ import annotations

import datetime
import json
import os
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path

from faker import Faker

HERE = Path(__file__).parent
SEED = 2204
LOCALES = ["en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "pl_PL", "nl_NL", "sv_SE",
           "pt_BR", "tr_TR", "en_IN", "ja_JP", "zh_CN", "ko_KR", "vi_VN", "fi_FI", "cs_CZ"]  # fmt: skip
FAKE = Faker(LOCALES)
FAKE.seed_instance(SEED)
RNG = random.Random(SEED)

# --- slot values -------------------------------------------------------------------------


def _latin(text: str) -> bool:
    return all(ord(c) < 0x250 for c in text)


def person() -> str:
    """A first name and a surname from a random locale (Latin script: the prompts are
    English)."""
    while True:
        loc = FAKE[RNG.choice(LOCALES)]
        name = f"{loc.first_name()} {loc.last_name()}"
        if _latin(name) and "." not in name:
            return name


def first_name() -> str:
    return person().split()[0]


def city() -> str:
    while True:
        value = FAKE[RNG.choice(["en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT"])].city()
        if _latin(value) and len(value.split()) <= 2:
            return value


CITIES = ["Lisbon", "Nairobi", "Osaka", "Toronto", "Krakow", "Lima", "Hanoi", "Cairo",
          "Denver", "Bergen", "Porto", "Seoul", "Quito", "Perth", "Dublin", "Austin"]  # fmt: skip
COUNTRIES = ["France", "Germany", "Japan", "Kenya", "Brazil", "Canada", "Vietnam", "Norway",
             "Chile", "Poland", "Egypt", "Thailand", "Mexico", "Ireland"]  # fmt: skip
COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark Industries", "Wayne Enterprises",
             "Vandelay", "Soylent", "Cyberdyne", "Tyrell", "Wonka"]  # fmt: skip
PRODUCTS = [
    "iPhone 13",
    "Pixel 7",
    "Galaxy S22",
    "ThinkPad X1",
    "Kindle Paperwhite",
    "PlayStation 5",
]
LANGUAGES = ["Spanish", "French", "German", "Japanese", "Italian", "Portuguese", "Korean", "Dutch"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]  # fmt: skip
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
LENGTH_UNITS = [("km", "kilometres"), ("miles", "miles"), ("meters", "meters"), ("feet", "feet")]
MASS_UNITS = ["kg", "pounds", "grams", "ounces"]
VOLUME_UNITS = ["liters", "gallons", "cups", "millilitres"]
CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF", "INR"]
TIME_UNITS = ["minutes", "hours", "days", "weeks"]


def ticket() -> str:
    return str(RNG.randint(1000, 99999))


def order_id() -> str:
    return FAKE.bothify(RNG.choice(["??-#####", "ORD-######", "#####-??", "INV-####-??"])).upper()


def hexid() -> str:
    return FAKE.hexify("^^^^^^")


def version() -> str:
    return f"{RNG.randint(1, 9)}.{RNG.randint(0, 20)}.{RNG.randint(0, 9)}"


def date() -> str:
    d = FAKE.date_between("-6y", "+1y")
    return RNG.choice([d.strftime("%B %-d, %Y"), d.strftime("%-d %B %Y"), d.isoformat()])


def year() -> str:
    return str(RNG.randint(1950, 2024))


def small() -> str:
    return str(RNG.randint(2, 60))


def amount() -> str:
    return str(RNG.choice([RNG.randint(5, 900), RNG.randint(1000, 50000)]))


def pick(values: list[str]) -> Callable[[], str]:
    return lambda: RNG.choice(values)


# slot name → (kind, generator). The kind is the near-miss category a change of it makes.
SLOTS: dict[str, tuple[str, Callable[[], str]]] = {
    "ticket": ("number", ticket),
    "n": ("number", small),
    "hour": ("number", lambda: str(RNG.randint(6, 11))),
    "amount": ("number", amount),
    "year": ("date", year),
    "date": ("date", date),
    "month": ("date", pick(MONTHS)),
    "weekday": ("date", pick(WEEKDAYS)),
    "order": ("identifier", order_id),
    "hex": ("identifier", hexid),
    "version": ("identifier", version),
    "sku": ("identifier", lambda: FAKE.bothify("SKU-####-???").upper()),
    "host": ("identifier", lambda: FAKE.bothify("web-##.?##").lower()),
    "person": ("name", person),
    "first": ("name", first_name),
    "city": ("name", pick(CITIES)),
    "fcity": ("name", city),
    "country": ("name", pick(COUNTRIES)),
    "company": ("name", pick(COMPANIES)),
    "product": ("name", pick(PRODUCTS)),
    "lang": ("name", pick(LANGUAGES)),
    "length": ("unit", pick([u for _, u in LENGTH_UNITS])),
    "length2": ("unit", pick([u for u, _ in LENGTH_UNITS])),
    "mass": ("unit", pick(MASS_UNITS)),
    "volume": ("unit", pick(VOLUME_UNITS)),
    "currency": ("unit", pick(CURRENCIES)),
    "timeunit": ("unit", pick(TIME_UNITS)),
}

# --- intents: wordings that ask the same thing --------------------------------------------

INTENTS: list[list[str]] = [
    [
        "Summarize ticket {ticket}.",
        "Give me a summary of ticket {ticket}.",
        "Can you summarise ticket #{ticket} for me?",
    ],
    [
        "What is the status of order {order}?",
        "Where is my order {order}?",
        "Check the status of order {order}, please.",
    ],
    [
        "[{hex}] Please update the account holder to <PERSON> on the billing profile.",
        "[{hex}] Please change the billing profile's account holder to <PERSON>.",
    ],
    [
        "Write a short birthday message for {person}.",
        "Compose a brief birthday note for {person}.",
        "Draft a short happy-birthday message to {person}.",
    ],
    [
        "What is the capital of {country}?",
        "Which city is the capital of {country}?",
        "Name the capital city of {country}.",
    ],
    [
        "Translate 'good morning' into {lang}.",
        "How do you say 'good morning' in {lang}?",
        "What is 'good morning' in {lang}?",
    ],
    [
        "Convert {n} {length} to {length2}.",
        "How many {length2} are {n} {length}?",
        "Please convert {n} {length} into {length2}.",
    ],
    [
        "How long does it take to bake {n} {mass} of bread?",
        "What is the baking time for {n} {mass} of bread?",
    ],
    [
        "How many calories are in {n} {volume} of orange juice?",
        "What's the calorie count of {n} {volume} of orange juice?",
    ],
    [
        "Convert {amount} {currency} to euros.",
        "How much is {amount} {currency} in euros?",
        "What is {amount} {currency} worth in euros?",
    ],
    [
        "What happened in {country} in {year}?",
        "Tell me what happened in {country} during {year}.",
        "Describe the events in {country} in {year}.",
    ],
    [
        "Schedule a meeting with {first} on {weekday}.",
        "Set up a meeting with {first} for {weekday}.",
        "Book a meeting with {first} on {weekday}, please.",
    ],
    [
        "Remind me to call {person} on {date}.",
        "Set a reminder to phone {person} on {date}.",
        "On {date}, remind me to call {person}.",
    ],
    [
        "What were the sales figures for {month} {year}?",
        "Show me the sales numbers for {month} {year}.",
        "How much did we sell in {month} {year}?",
    ],
    [
        "What's new in version {version}?",
        "What changed in release {version}?",
        "List the changes in version {version}.",
    ],
    ["Is product {sku} in stock?", "Do you have {sku} in stock?", "Check stock for item {sku}."],
    [
        "Restart the service on host {host}.",
        "Please restart the service running on {host}.",
        "Can you restart the service on {host}?",
    ],
    [
        "What's the weather forecast for {city} tomorrow?",
        "Will it rain in {city} tomorrow?",
        "Give me tomorrow's weather forecast for {city}.",
    ],
    [
        "How do I get from {city} to {fcity} by train?",
        "What is the best train route from {city} to {fcity}?",
        "Which trains go from {city} to {fcity}?",
    ],
    [
        "Who is the CEO of {company}?",
        "Who runs {company} as chief executive?",
        "Tell me who {company}'s CEO is.",
    ],
    [
        "Write a product description for the {product}.",
        "Draft a product description of the {product}.",
        "Create marketing copy describing the {product}.",
    ],
    [
        "Refund {amount} {currency} to customer {order}.",
        "Issue a refund of {amount} {currency} to customer {order}.",
        "Please process a {amount} {currency} refund for customer {order}.",
    ],
    ["What is {n} times {amount}?", "Multiply {n} by {amount}.", "Calculate {n} x {amount}."],
    [
        "Give me {n} ideas for a team offsite.",
        "Suggest {n} team offsite ideas.",
        "List {n} ideas for our team's offsite.",
    ],
    [
        "How many {timeunit} are in {n} years?",
        "Convert {n} years into {timeunit}.",
        "{n} years is how many {timeunit}?",
    ],
    [
        "Draft an email to {person} about the invoice due on {date}.",
        "Write an email to {person} regarding the invoice that is due {date}.",
        "Compose an email for {person} about the {date} invoice deadline.",
    ],
    [
        "Book a table for {n} at 7 pm on {weekday}.",
        "Reserve a table for {n} people, {weekday} at 7pm.",
        "I need a dinner reservation for {n} on {weekday} at 7 pm.",
    ],
    [
        "Set the thermostat to {n} degrees Celsius.",
        "Change the thermostat to {n} °C.",
        "Please set the heating to {n} degrees Celsius.",
    ],
    [
        "Cancel subscription {order}.",
        "Please cancel my subscription {order}.",
        "I want to cancel the subscription with id {order}.",
    ],
    [
        "Explain the error code {hex} in the build log.",
        "What does error {hex} in the build log mean?",
        "The build log shows error code {hex}; what does it mean?",
    ],
    [
        "How far is {city} from {country}'s capital?",
        "What is the distance between {city} and the capital of {country}?",
    ],
    [
        "Give me a {n}-day itinerary for {country}.",
        "Plan a {n} day trip to {country}.",
        "Suggest an itinerary for {n} days in {country}.",
    ],
    [
        "How do I pay {amount} {currency} to {person}?",
        "What's the best way to send {amount} {currency} to {person}?",
    ],
    [
        "Ship {n} units of {sku} to the {city} warehouse.",
        "Send {n} units of {sku} to our {city} warehouse.",
        "Please dispatch {n} units of {sku} to the warehouse in {city}.",
    ],
    ["What time is sunset in {city} on {date}?", "When does the sun set in {city} on {date}?"],
    [
        "Add {person} to the project channel.",
        "Please add {person} to the project's channel.",
        "Invite {person} into the project channel.",
    ],
    [
        "Show invoices from {company} after {date}.",
        "List {company}'s invoices dated after {date}.",
        "Which invoices did {company} send after {date}?",
    ],
    [
        "Run {n} km in under 30 minutes: give me a training plan.",
        "I want a training plan to run {n} km in less than 30 minutes.",
        "Make me a plan to run {n} km in under half an hour.",
    ],
    [
        "Recommend a book similar to the ones {person} wrote.",
        "Suggest a book like those by {person}.",
    ],
    [
        "What was the population of {country} in {year}?",
        "How many people lived in {country} in {year}?",
        "Give the population of {country} for {year}.",
    ],
    [
        "How much does shipping {n} {mass} to {country} cost?",
        "What is the cost to ship {n} {mass} to {country}?",
        "Shipping price for {n} {mass} to {country}?",
    ],
    [
        "Rollback deployment {hex} on the staging cluster.",
        "Roll back the deployment {hex} in staging.",
        "Please revert deployment {hex} on staging.",
    ],
    [
        "Move the {weekday} standup to {hour} am.",
        "Reschedule the {weekday} standup to {hour} am.",
        "Change {weekday}'s standup to start at {hour} am.",
    ],
    [
        "Set a timer for {n} {timeunit}.",
        "Start a {n} {timeunit} timer.",
        "Time {n} {timeunit} for me.",
    ],
    [
        "Is a {n} {mass} suitcase too heavy for a flight?",
        "Can I take a {n} {mass} suitcase on a plane, or is it too heavy?",
    ],
    [
        "Is it safe to drink {n} {volume} of coffee a day?",
        "Is drinking {n} {volume} of coffee daily safe?",
        "Are {n} {volume} of coffee per day safe to drink?",
    ],
    [
        "How long does it take to walk {n} {length2}?",
        "How much time does walking {n} {length2} take?",
    ],
    ["Is {year} a leap year?", "Was {year} a leap year?", "Does {year} have a February 29th?"],
]

# Surface-only paraphrases, written by hand: casing, punctuation, contractions, politeness.
SURFACE_PARAPHRASES = [
    ("how do i reset my password", "How do I reset my password?"),
    ("What's the weather like on Mars?", "What is the weather like on Mars?"),
    ("Explain photosynthesis in simple terms.", "Explain photosynthesis simply."),
    ("Write a haiku about autumn.", "Compose a haiku about autumn."),
    ("How many days are in a leap year?", "How many days does a leap year have?"),
    ("can you explain what a mortgage is", "Could you explain what a mortgage is?"),
    ("Tell me a joke about cats.", "Tell me a cat joke."),
    ("What is the boiling point of water?", "At what temperature does water boil?"),
    ("Give me tips for better sleep.", "What are some tips for sleeping better?"),
    ("How do I make a cup of tea?", "How do you make a cup of tea?"),
    ("What does HTTP stand for?", "What is HTTP short for?"),
    ("Please summarize the French Revolution.", "Summarize the French Revolution."),
    ("Why is the sky blue?", "why is the sky blue"),
    ("How do I undo my last git commit?", "How can I undo the last commit in git?"),
    ("What are the symptoms of the flu?", "What symptoms does the flu cause?"),
    ("Define machine learning.", "What is the definition of machine learning?"),
    ("How do I center a div in CSS?", "How to center a div with CSS?"),
    ("List the planets of the solar system.", "Name the planets in the solar system."),
    ("Who painted the Mona Lisa?", "Who was the painter of the Mona Lisa?"),
    ("What's the difference between a list and a tuple in Python?",
     "What is the difference between Python lists and tuples?"),
    ("Recommend a good science fiction novel.", "Can you recommend a good sci-fi novel?"),
    ("How do vaccines work?", "How does a vaccine work?"),
    ("Give me a recipe for pancakes.", "What's a good pancake recipe?"),
    ("How can I improve my public speaking?", "How do I get better at public speaking?"),
    ("Explain how a bill becomes a law.", "How does a bill become a law?"),
    ("I can't log in to my account, what should I do?", "I cannot log into my account. What should I do?"),
    ("Don't include any code in the answer: what is recursion?",
     "Without including code, explain what recursion is."),
    ("What is the tallest mountain on Earth?", "Which mountain is the tallest on Earth?"),
]  # fmt: skip

# Negation: the same request with its meaning turned around by a negation (written by hand).
NEGATIONS = [
    ("Should I restart the server after the update?", "Should I not restart the server after the update?"),
    ("Which foods contain gluten?", "Which foods don't contain gluten?"),
    ("List the employees who completed the security training.",
     "List the employees who have not completed the security training."),
    ("Is it safe to take ibuprofen with coffee?", "Is it unsafe to take ibuprofen with coffee?"),
    ("Write a story where the hero wins.", "Write a story where the hero never wins."),
    ("Show me orders that were shipped.", "Show me orders that were not shipped."),
    ("Can I use this API key in production?", "Can't I use this API key in production?"),
    ("Summarize the reviews that mention the battery.", "Summarize the reviews that do not mention the battery."),
    ("Which countries use the euro?", "Which countries do not use the euro?"),
    ("Explain why the test passes.", "Explain why the test doesn't pass."),
    ("Find customers who paid on time.", "Find customers who never paid on time."),
    ("Is the museum open on Mondays?", "Is the museum closed on Mondays?"),
    ("Give me recipes with nuts.", "Give me recipes without nuts."),
    ("Which plants need direct sunlight?", "Which plants do not need direct sunlight?"),
    ("Tell me which invoices are overdue.", "Tell me which invoices are not overdue."),
    ("Do I need a visa to visit Japan?", "Do I not need a visa to visit Japan?"),
    ("Rewrite this paragraph in a formal tone.", "Rewrite this paragraph in an informal tone."),
    ("Should the function return null on error?", "Shouldn't the function return null on error?"),
    ("Which students passed the exam?", "Which students failed the exam?"),
    ("Include the appendix in the report.", "Exclude the appendix from the report."),
    ("List the servers with backups enabled.", "List the servers with no backups enabled."),
    ("Are the files encrypted at rest?", "Are the files not encrypted at rest?"),
    ("Why does my code compile?", "Why doesn't my code compile?"),
    ("Which users have two-factor authentication?", "Which users lack two-factor authentication?"),
    ("Approve the pull request.", "Do not approve the pull request."),
    ("Is caffeine allowed during pregnancy?", "Is caffeine forbidden during pregnancy?"),
    ("Find flights with a layover in Dubai.", "Find flights with no layover in Dubai."),
    ("Explain when to use a mutex.", "Explain when not to use a mutex."),
]  # fmt: skip

# Swapped subject and object (or the two sides of a relation); {a}/{b} take Faker names.
SWAPS = [
    ("Did {a} send the contract to {b}?", "Did {b} send the contract to {a}?"),
    ("Write an apology from {a} to {b}.", "Write an apology from {b} to {a}."),
    ("Does {a} report to {b}?", "Does {b} report to {a}?"),
    ("Transfer 200 dollars from {a} to {b}.", "Transfer 200 dollars from {b} to {a}."),
    ("Draft a letter in which {a} thanks {b} for the help.",
     "Draft a letter in which {b} thanks {a} for the help."),
    ("Is {a} older than {b}?", "Is {b} older than {a}?"),
    ("Did the dog bite the mailman?", "Did the mailman bite the dog?"),
    ("Does the cat chase the mouse in the story?", "Does the mouse chase the cat in the story?"),
    ("Is Paris bigger than Lyon?", "Is Lyon bigger than Paris?"),
    ("Convert 100 USD to EUR.", "Convert 100 EUR to USD."),
    ("How do I migrate from MySQL to PostgreSQL?", "How do I migrate from PostgreSQL to MySQL?"),
    ("Translate this sentence from German to English.", "Translate this sentence from English to German."),
    ("Why did the Romans invade Britain?", "Why did the Britons invade Rome?"),
    ("Copy the files from the laptop to the server.", "Copy the files from the server to the laptop."),
    ("Did Apple acquire Beats?", "Did Beats acquire Apple?"),
    ("Does the client call the server first?", "Does the server call the client first?"),
    ("Is the parent process waiting for the child?", "Is the child process waiting for the parent?"),
    ("Book a flight from Osaka to Tokyo.", "Book a flight from Tokyo to Osaka."),
    ("Write a poem in which the sun loves the moon.", "Write a poem in which the moon loves the sun."),
    ("Did {a} beat {b} in the final?", "Did {b} beat {a} in the final?"),
    ("Should {a} pay {b} back?", "Should {b} pay {a} back?"),
    ("Forward {a}'s email to {b}.", "Forward {b}'s email to {a}."),
    ("Is the teacher grading the students fairly?", "Are the students grading the teacher fairly?"),
    ("Which team defeated Brazil in 2014?", "Which team did Brazil defeat in 2014?"),
    ("Merge the feature branch into main.", "Merge main into the feature branch."),
    ("Does the tenant owe the landlord money?", "Does the landlord owe the tenant money?"),
]  # fmt: skip

SLOT = re.compile(r"\{(\w+)\}")
HELDOUT_SHARE = 0.4


def fill(wording: str, values: dict[str, str]) -> str:
    return SLOT.sub(lambda m: values[m.group(1)], wording)


def nearby(slot: str, value: str) -> str | None:
    """Half the time, a close value of the same form: 4411 → 4412, a date a few days off."""
    if RNG.random() < 0.5:
        return None
    if value.isdigit():
        return str(max(1, int(value) + RNG.choice([-10, -2, -1, 1, 1, 2, 3, 100])))
    if slot == "date":
        for form in ("%B %-d, %Y", "%-d %B %Y", "%Y-%m-%d"):
            try:
                day = datetime.datetime.strptime(value, form.replace("%-", "%"))
            except ValueError:
                continue
            return (day + datetime.timedelta(days=RNG.choice([-7, -1, 1, 2, 30]))).strftime(form)
    return None


def changed(slot: str, value: str) -> str:
    """Another value of the slot's kind, different from `value` in every spelling."""
    close = nearby(slot, value)
    if close is not None and close != value:
        return close
    generate = SLOTS[slot][1]
    for _ in range(200):
        other = generate()
        if other.lower() != value.lower() and other.split()[0].lower() != value.split()[0].lower():
            return other
    raise RuntimeError(f"no second value for {slot}")


def intent_pairs(index: int, wordings: list[str], fills: int) -> list[dict[str, str]]:
    slots = sorted({s for w in wordings for s in SLOT.findall(w)})
    rows = []
    for _ in range(fills):
        values = {s: SLOTS[s][1]() for s in slots}
        while len(set(values.values())) < len(values):  # e.g. {length} == {length2}
            values = {s: SLOTS[s][1]() for s in slots}
        a, b = RNG.sample(wordings, 2)
        rows.append(
            {"label": "hit", "category": "paraphrase", "a": fill(a, values), "b": fill(b, values)}
        )
        slot = RNG.choice(slots)
        other = dict(values, **{slot: changed(slot, values[slot])})
        other_wording = b if RNG.random() < 1 / 3 else a
        rows.append({"label": "miss", "category": SLOTS[slot][0], "a": fill(a, values),
                     "b": fill(other_wording, other), "changed": slot})  # fmt: skip
    for row in rows:
        row["source"] = f"intent-{index}"
    return rows


def main() -> None:
    if os.environ.get("PYTHONHASHSEED") != "0":  # some of Faker's locales iterate over sets
        os.execve(
            sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"}
        )
    rows: list[dict[str, str]] = []
    for index, wordings in enumerate(INTENTS):
        rows += intent_pairs(index, wordings, fills=4)
    for index, (a, b) in enumerate(SURFACE_PARAPHRASES):
        rows.append(
            {"label": "hit", "category": "paraphrase", "a": a, "b": b, "source": f"surface-{index}"}
        )
    for index, (a, b) in enumerate(NEGATIONS):
        rows.append(
            {"label": "miss", "category": "negation", "a": a, "b": b, "source": f"negation-{index}"}
        )
    for index, (a, b) in enumerate(SWAPS):
        names = {"a": person(), "b": person()}
        rows.append({"label": "miss", "category": "swap", "a": fill(a, names), "b": fill(b, names),
                     "source": f"swap-{index}"})  # fmt: skip
    heldout: set[str] = set()
    for kind in ("intent", "surface", "negation", "swap"):  # the same share of each kind
        sources = sorted({r["source"] for r in rows if r["source"].startswith(kind)})
        heldout |= set(RNG.sample(sources, round(len(sources) * HELDOUT_SHARE)))
    with (HERE / "pairs.jsonl").open("w") as out:
        for number, row in enumerate(rows):
            split = "heldout" if row["source"] in heldout else "tune"
            out.write(json.dumps({"id": number, "split": split, **row}, ensure_ascii=False) + "\n")
    print(f"{len(rows)} pairs written")


if __name__ == "__main__":
    main()
