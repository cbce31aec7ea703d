"""A development set in the product's shape: one user working with an assistant on a project over many dated sessions.

LoCoMo's conversations are two friends chatting in short turns; Continuum's users work with an assistant in long
messages (code, lists, plans), give standing instructions, change their minds, correct themselves, and come back to
what the assistant suggested weeks earlier. This generator writes such conversations, with probing questions and
their evidence turns, in LoCoMo's JSON layout, so `bench/locomo.py` reads it as it reads LoCoMo:

    .venv/bin/python bench/product_set.py                 # writes bench/data/product-dev.json (seed 25)
    .venv/bin/python bench/product_set.py --pastes        # the same set with long pastes: product-dev-long.json
    .venv/bin/python bench/product_set.py --split         # each exchange a session of its own: product-dev-split.json
    .venv/bin/python bench/locomo.py bench/data/product-dev.json --shape assistant

Sources and licence: every sentence, template and word list below was written for this project (no dataset text is
copied); the generated file is the project's own, under the repository's licence. The output is a pure function of
the seed: the same seed writes the same file byte for byte.

What each conversation holds (placed at seeded sessions, embedded in long turns among distracting text on the same
project, so the words around the evidence talk about the same things):
- two standing instructions ("always answer in metric units"), asked about directly and *implicitly* (a task the
  instruction governs, whose words do not resemble the instruction's turn);
- a preference that changes (old, then new), and two facts corrected later;
- two suggestions by the assistant, one of which the user later says they adopted;
- two threads that run across sessions (a table's schema, a page's load time);
- three events said with relative dates ("yesterday", "last Friday", "two days ago");
- details buried in long messages, from the user and from the assistant.

Question types (each question carries `type` and a LoCoMo `category` so unchanged readers still score it):
across-sessions (1), temporal (2), standing (3: preferences and instructions), single-session (4), update (4:
knowledge updates, the current value of something that changed). The questions are written by the templates
below, fixed before any retrieval method was measured on them.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.locomo import sessions_of  # noqa: E402

OUT = Path(__file__).resolve().parent / "data" / "product-dev.json"
OUT_LONG = Path(__file__).resolve().parent / "data" / "product-dev-long.json"
OUT_SPLIT = Path(__file__).resolve().parent / "data" / "product-dev-split.json"
SEED = 25
SESSIONS = 10

TYPE_CATEGORY = {"across-sessions": 1, "temporal": 2, "standing": 3, "single-session": 4, "update": 4}

PROJECTS = [
    # (project, user, entity plural, entity singular, fields, domain words)
    ("Ledgerly", "Priya", "invoices", "invoice", ["customer_id", "amount_cents", "due_on", "status", "currency"],
     "billing clients, overdue reminders and PDF exports"),
    ("TrailMate", "Tomás", "routes", "route", ["start_point", "distance", "ascent", "difficulty", "region"],
     "hiking routes, elevation profiles and offline maps"),
    ("Brewlog", "Aiko", "batches", "batch", ["recipe_id", "gravity", "brewed_on", "yeast", "volume"],
     "fermentation logs, gravity readings and recipe scaling"),
    ("ShelfScan", "Marcus", "books", "book", ["isbn", "title", "shelf_code", "borrowed_by", "condition"],
     "a school library's barcode scanning and loans"),
    ("Stationary", "Lena", "stations", "station", ["station_code", "latitude", "elevation", "recorded_at", "temp"],
     "cleaning climate station records for a thesis"),
    ("Pantry", "Kwame", "recipes", "recipe", ["title", "servings", "prep_minutes", "cuisine", "owner_id"],
     "weekly meal plans, shopping lists and leftovers"),
    ("GigBoard", "Sofia", "listings", "listing", ["employer_id", "rate", "posted_on", "skills", "remote"],
     "a freelance job board with search and alerts"),
    ("Tidewatch", "Ewan", "readings", "reading", ["sensor_id", "level_mm", "taken_at", "battery", "site"],
     "tide gauge sensors, alerts and a public dashboard"),
    ("ClinicQ", "Farah", "appointments", "appointment", ["patient_id", "slot_start", "doctor_id", "reason", "state"],
     "a small clinic's booking queue and reminders"),
    ("PixelForge", "Noah", "levels", "level", ["world", "tile_map", "par_time", "author_id", "published"],
     "a 2D puzzle game's level editor and sharing"),
    ("RentRoll", "Inês", "leases", "lease", ["tenant_name", "unit", "monthly_rent", "starts_on", "deposit"],
     "tracking rents, deposits and repairs for four flats"),
    ("SoundCrate", "Yuki", "episodes", "episode", ["show_id", "title", "duration", "published_at", "audio_url"],
     "publishing a podcast: feeds, transcripts and analytics"),
]

SESSION_TOPICS = ["the data model", "importing old data", "authentication", "the reports page", "background jobs",
                  "deployment", "testing", "performance", "the public API", "backups", "search", "notifications",
                  "the admin screens", "error handling", "the dashboard"]

# Standing instructions: what the user says, how it is asked about, and a task it governs that does not echo it.
INSTRUCTIONS = [
    dict(say="From now on, always answer in metric units: kilometres, kilograms and degrees Celsius, never miles or "
              "pounds.", key="metric units", answer="metric units (km, kg, °C)",
         direct=["Which system of measurement did {u} ask the assistant to use in every answer?",
                 "What did {u} tell the assistant about units?"],
         task=["Estimate how far and how heavy a typical delivery for {p} would be.",
               "Give {u} a rough size for the server rack they are planning."]),
    dict(say="Please use type hints in every Python snippet you write for me, including return types.",
         key="type hints", answer="type hints in every Python snippet",
         direct=["What did {u} ask the assistant to include in every Python snippet?",
                 "Which coding convention did {u} ask the assistant to follow in Python code?"],
         task=["Write a Python function that validates a {e1} record for {u}.",
               "Show {u} a helper that loads the {e} from a CSV file."]),
    dict(say="Keep your answers under 200 words unless I explicitly ask for the long version.",
         key="short answers", answer="under 200 words unless asked",
         direct=["How long did {u} want the assistant's answers to be?",
                 "What length limit did {u} set for replies?"],
         task=["Summarise the options for caching the {e} for {u}.",
               "Explain to {u} how the background job queue should work."]),
    dict(say="Write every date as ISO 8601, like 2024-03-05, never as 03/05 or 5/3.", key="ISO dates",
         answer="ISO 8601 dates (YYYY-MM-DD)",
         direct=["Which date format did {u} tell the assistant to use?",
                 "How did {u} want dates written?"],
         task=["List the next three release milestones for {p}.",
               "Draft a schedule for {u}'s next sprint."]),
    dict(say="Use British spelling in anything you draft for me: colour, organise, licence.", key="British spelling",
         answer="British spelling", direct=["Which spelling convention did {u} ask for?",
                                            "What did {u} say about spelling in drafts?"],
         task=["Draft the release notes paragraph for {p}'s next version.",
               "Write the welcome e-mail {u} sends to new users."]),
    dict(say="Whenever you propose code, include a pytest test that exercises it.", key="tests with code",
         answer="a pytest test with every code proposal",
         direct=["What did {u} ask the assistant to add whenever it proposes code?",
                 "Which standing rule did {u} set about tests?"],
         task=["Add a function that merges duplicate {e} for {u}.",
               "Write the code that archives old {e} in {p}."]),
    dict(say="Never suggest a new third-party dependency without saying why the standard library is not enough.",
         key="no new dependencies", answer="justify any new dependency over the standard library",
         direct=["What rule did {u} set about third-party dependencies?",
                 "What did {u} ask before the assistant recommends a package?"],
         task=["How should {u} parse the CSV export of {e}?", "How can {p} send its reminder e-mails?"]),
    dict(say="Always show times in UTC and say that they are UTC.", key="UTC times", answer="times in UTC, labelled",
         direct=["Which time zone did {u} ask the assistant to use for times?",
                 "How did {u} want times shown?"],
         task=["When should {u}'s nightly backup job run?", "Plan the maintenance window for {p}."]),
    dict(say="Write SQL keywords in upper case, one clause per line.", key="SQL style",
         answer="upper-case SQL keywords, one clause per line",
         direct=["How did {u} want SQL formatted?", "Which SQL style did {u} ask for?"],
         task=["Write a query that counts the {e} per month for {u}.",
               "Find the {e} that changed last week in {p}'s database."]),
    dict(say="Link the official documentation page for any library function you mention.", key="link the docs",
         answer="a link to the official docs for every library function",
         direct=["What did {u} ask the assistant to add whenever it mentions a library function?",
                 "Which rule about documentation links did {u} set?"],
         task=["How can {u} retry failed HTTP calls?", "Which library call should {p} use to resize images?"]),
]

PREFERENCE_CHANGES = [  # topic, old, new, why old, why new
    ("editor", "VS Code", "Neovim", "the Python extension just works", "I wanted everything in the terminal"),
    ("database for the prototype", "PostgreSQL", "SQLite", "I know it from work",
     "one file is easier to ship to testers"),
    ("test runner", "unittest", "pytest", "it ships with Python", "fixtures save me a lot of boilerplate"),
    ("charting library", "matplotlib", "Plotly", "the plots look like the papers I read",
     "interactive zoom helps when I demo"),
    ("hosting provider", "Heroku", "Fly.io", "I have used it for years", "the regions are closer to my users"),
    ("package manager", "pip-tools", "uv", "the lock files are plain text", "installs take seconds instead of minutes"),
    ("frontend approach", "React", "HTMX", "the team knows it", "most pages are forms and tables anyway"),
    ("CI service", "Jenkins", "GitHub Actions", "it already runs at my employer", "it lives next to the code"),
    ("task queue", "Celery", "RQ", "it is what every tutorial uses", "it has far fewer moving parts"),
    ("code formatter", "Black", "Ruff's formatter", "it is the default everywhere", "one tool lints and formats"),
]

CORRECTIONS = [  # topic, question, first value, corrected value, how the first is said, how the correction is said
    ("deadline", "When is {u}'s demo for {p} due?", "{d1}", "{d2}", "the demo for the client is due on {v}",
     "correction on the deadline: the demo was moved, it is now on {v}"),
    ("team size", "How many people work on {p}?", "four", "six", "we are a team of {v} people",
     "I undersold the team earlier: we are {v} people now, two contractors joined"),
    ("server memory", "How much RAM does {u}'s server have?", "2 GB", "4 GB", "the VPS only has {v} of RAM",
     "I was wrong about the VPS, it actually has {v} of RAM"),
    ("Python version", "Which Python version does {p} run in production?", "3.9", "3.11",
     "production runs Python {v}", "turns out production is on Python {v}, not what I told you"),
    ("hosting budget", "What is {u}'s monthly hosting budget?", "$40", "$75",
     "my hosting budget is {v} a month", "good news, the hosting budget went up to {v} a month"),
    ("active users", "How many active users does {p} have?", "about 300", "about 1,200",
     "we have {v} active users", "I misread the analytics: it is {v} active users, not what I said"),
    ("launch city", "In which city does {p} launch first?", "Leeds", "Bristol", "we launch in {v} first",
     "change of plan, the first launch city is now {v}"),
]

SUGGESTIONS = [  # topic, the assistant's suggestion, how the user later refers to it
    ("rate limiting", "a token bucket limiter that allows bursts of 20 requests and refills 5 per second",
     "the token bucket you suggested"),
    ("the slow list query", "a composite index on ({f0}, {f2}) so the list can be read in order",
     "that composite index you proposed"),
    ("caching", "caching the {e} list in Redis with a 5-minute expiry and deleting the key on every write",
     "the Redis cache with the short expiry"),
    ("flaky network calls", "exponential backoff with full jitter, capped at 60 seconds and 6 attempts",
     "the backoff with jitter you described"),
    ("the big import", "splitting the import into batches of 500 rows, each in its own transaction",
     "the batches of 500 you recommended"),
    ("deleting records", "a soft-delete column named archived_at instead of deleting rows",
     "the archived_at soft delete idea"),
    ("file downloads", "signed URLs that expire after 15 minutes instead of public links",
     "the expiring signed URLs"),
    ("risky releases", "feature flags stored in a settings table, switched per customer",
     "the feature flags table you suggested"),
]

EVENTS = [  # what happened as the user says it, as a question names it ("when did X ..."), and told of X
    ("I deployed version 1.0 to production", "deploy version 1.0 to production", "{u} deployed version 1.0"),
    ("we ran the first user test with five people", "run the first user test", "the first user test"),
    ("I migrated the database to the new host", "migrate the database to the new host",
     "the database migration to the new host"),
    ("I gave the demo to the client", "give the demo to the client", "the client demo"),
    ("we found the data-loss bug in the sync job", "find the data-loss bug in the sync job",
     "finding the data-loss bug"),
    ("I signed the contract with the design agency", "sign the contract with the design agency",
     "signing the design agency's contract"),
    ("the first paying customer signed up", "get the first paying customer", "the first paying customer"),
]
RELATIVE = [("yesterday", 1), ("two days ago", 2), ("three days ago", 3), ("last week", 7)]

USER_DETAILS = [  # what is said, the question, the answer
    ("the staging server listens on port {port}", "Which port does {u}'s staging server listen on?", "{port}"),
    ("my colleague {name} reviews all the pull requests", "Who reviews {u}'s pull requests?", "{name}"),
    ("the repository is called {repo}", "What is the name of {p}'s repository?", "{repo}"),
    ("the backups go to a bucket named {bucket}", "Where do {p}'s backups go?", "{bucket}"),
    ("the client contact is {client}", "Who is {u}'s contact at the client?", "{client}"),
    ("the nightly export runs at {hour}:30", "At what time does the nightly export of {p} run?", "{hour}:30"),
]
ASSISTANT_DETAILS = [
    ("set the database connection pool to {pool} connections", "What connection pool size did the assistant "
     "recommend for {p}?", "{pool}"),
    ("keep log files for {days} days and rotate them daily", "How long did the assistant suggest keeping {p}'s logs?",
     "{days} days"),
    ("give the health check a timeout of {secs} seconds", "What health check timeout did the assistant recommend "
     "to {u}?", "{secs} seconds"),
]
# --- the gold: each planted fact as an observation in the third person (LoCoMo's gold is written that way), for
# bench/extraction.py. Keyed by what the plant is made from, so adding them changes no generated text.
INSTRUCTION_GOLD = {
    "metric units": "{u} wants every answer in metric units: kilometres, kilograms and degrees Celsius.",
    "type hints": "{u} wants type hints, return types included, in every Python snippet.",
    "short answers": "{u} wants answers under 200 words unless they ask for the long version.",
    "ISO dates": "{u} wants every date written as ISO 8601.",
    "British spelling": "{u} wants British spelling in anything drafted for them.",
    "tests with code": "{u} wants a pytest test with every code proposal.",
    "no new dependencies": "{u} wants any new third-party dependency justified against the standard library.",
    "UTC times": "{u} wants times shown in UTC and labelled as UTC.",
    "SQL style": "{u} wants SQL keywords in upper case, one clause per line.",
    "link the docs": "{u} wants a link to the official documentation of every library function mentioned.",
}
CORRECTION_GOLD = {  # by topic, the value as {v}
    "deadline": "{u}'s demo for the client is due on {v}.", "team size": "{p}'s team is {v} people.",
    "server memory": "{u}'s VPS has {v} of RAM.", "Python version": "{p} runs Python {v} in production.",
    "hosting budget": "{u}'s hosting budget is {v} a month.", "active users": "{p} has {v} active users.",
    "launch city": "{p} launches first in {v}.",
}
EVENT_GOLD = {  # by how a question names the event
    "deploy version 1.0 to production": "{u} deployed version 1.0 of {p} to production.",
    "run the first user test": "{u} ran {p}'s first user test with five people.",
    "migrate the database to the new host": "{u} migrated {p}'s database to a new host.",
    "give the demo to the client": "{u} gave the demo of {p} to the client.",
    "find the data-loss bug in the sync job": "{u} found a data-loss bug in {p}'s sync job.",
    "sign the contract with the design agency": "{u} signed a contract with a design agency.",
    "get the first paying customer": "{p} got its first paying customer.",
}
SCHEMA_GOLD = ["{u} created the {e} table with {f0}, {f1} and {f2} as the first columns.",
               "{u} added a {f3} column to {e} to filter on it.",
               "{u} made {f1} nullable in {e} because older records never had it.",
               "{u} added a unique constraint on ({f0}, {f2}) in {e} to stop duplicates.",
               "{u} dropped the unused {f4} column from {e}."]
DETAIL_GOLD = {  # by the question
    "Which port does {u}'s staging server listen on?": "{u}'s staging server listens on port {port}.",
    "Who reviews {u}'s pull requests?": "{u}'s colleague {name} reviews all the pull requests.",
    "What is the name of {p}'s repository?": "{p}'s repository is called {repo}.",
    "Where do {p}'s backups go?": "{p}'s backups go to a bucket named {bucket}.",
    "Who is {u}'s contact at the client?": "{u}'s contact at the client is {client}.",
    "At what time does the nightly export of {p} run?": "{p}'s nightly export runs at {hour}:30.",
}
# The filler sentences that state something durable about the user or the project (a fact, a preference, a plan,
# an event), as observations; the others (doubts, apologies, opinions of a blog post) are chatter. The gold holds
# each where the conversation first says it: a repeat adds nothing a memory should store again.
FILLER_GOLD = {
    0: "{p}'s {e} table has grown a lot since the first import and some screens feel sluggish.",
    2: "Most of {p}'s {e} come from a spreadsheet that users still edit by hand, so the data is messy.",
    3: "{u} prefers boring code to clever code and maintains {p} alone.",
    4: "Nobody uses the filters on {p}'s admin page for {e}.",
    5: "{u} wrote a script to check the {f2} values and it found a few odd rows.",
    6: "One of {p}'s tests fails on CI about once a week.",
    8: "{p}'s logs show the same warning about {f3} every few minutes.",
    9: "{u} plans to ship something small this month and improve it once people use it.",
    12: "{u} is new to {domain}.",
    14: "A user asked {u} why an edited {e1} showed the old {f2} for a while.",
    15: "{u} wants to understand the reasoning behind code rather than copy snippets.",
    17: "{u} keeps notes in a markdown file.",
    18: "{p}'s deploys take about four minutes and rolling back is manual.",
}

NAMES = ["Oluwaseun", "Margit", "Dmitri", "Beatriz", "Hamish", "Ayesha", "Joaquín", "Ingrid", "Rafferty", "Mei"]
CLIENTS = ["Harriet at Northwind Dental", "Olu at Greenhill Estates", "Sanne at Kestrel Audio",
           "Bram at Larchmont Brewing", "Elif at Quayside Clinic", "Rhys at Marlow Outdoor"]

# --- distracting text: long messages about the same project that answer none of the questions ------------------

USER_OPENERS = [
    "Back on {p} today. I spent the morning on {t} and it went slower than I hoped.",
    "Quick context before my question: I am still working through {t} for {p}.",
    "I picked up {t} again after a few days away, so bear with me if I repeat myself.",
    "Another {p} session. Today is mostly about {t}, and I have a couple of things to check with you.",
    "I had an hour free tonight so I looked at {t} again.",
    "Following up on {t}: I tried a few things since we last talked.",
]
USER_FILLER = [
    "The {e} table has grown a lot since the first import and some screens feel sluggish now.",
    "I keep second-guessing how the {f1} field should behave when it is missing.",
    "Most of the {e} come from a spreadsheet that my users still edit by hand, so the data is messy.",
    "I would rather keep the code boring than clever; I am the only one maintaining it for now.",
    "The admin page for {e} works, but the filters are clumsy and nobody uses them.",
    "I wrote a small script to check the {f2} values and it found a handful of odd rows.",
    "Tests pass locally but one of them fails on CI about once a week, which is annoying.",
    "I am not sure whether {t} belongs in the web process or in a background job.",
    "The logs show the same warning about {f3} every few minutes and I do not know where it comes from.",
    "My plan is to ship something small this month and improve it once people actually use it.",
    "I read two blog posts about {t} and they disagree with each other, which did not help.",
    "Sorry, this is a long one; I pasted the relevant part below.",
    "Part of the problem is that {domain} is new to me, so I do not know the usual conventions.",
    "I also renamed a few variables so the code reads better, nothing functional.",
    "A user e-mailed me yesterday evening asking why a {e1} they edited showed the old {f2} for a while.",
    "I would like to understand the reasoning, not just copy a snippet, because I will have to debug it later.",
    "The documentation for {t} assumes a much bigger team than mine, so half of it does not apply.",
    "I have been keeping notes in a markdown file so I can remember why things are the way they are.",
    "Deploys take about four minutes, which is fine, but rolling back is still a manual process.",
    "Honestly the hardest part is deciding what not to build yet.",
]
USER_TRIED = [
    "restarted the worker and cleared the cache", "added print statements around the {f1} parsing",
    "ran the import again on a fresh database", "compared the {e} count before and after the job",
    "read the framework's release notes for anything related", "pinned the library to the previous version",
    "wrote a failing test for the {f3} case", "checked the server's disk and memory graphs",
]
USER_QUESTIONS = [
    "What would you change first?", "Does this approach make sense, or am I overcomplicating it?",
    "How would you structure this?", "Can you walk me through the trade-offs?",
    "What am I missing here?", "Is there a simpler way to do this?",
]
ASSISTANT_OPENERS = [
    "Good question: {t} is where small projects like {p} usually pick up accidental complexity.",
    "Here is how I would approach {t} for {p}, keeping it simple enough to maintain alone.",
    "Thanks for the detail, that helps. A few observations about {t} first, then a concrete plan.",
    "Short version: you are close, and the remaining issues with {t} are fixable in an afternoon.",
    "Let me split this into what to do now and what can wait until {p} has more users.",
]
ASSISTANT_STEPS = [
    "Write down what a valid {e1} looks like before touching the code, including which fields may be empty.",
    "Move the slow part of {t} out of the request and into a job the web process only enqueues.",
    "Add a test that reproduces the problem with a tiny fixture of three {e} before fixing anything.",
    "Log one structured line per {e1} processed, with its id, so failures can be traced later.",
    "Validate {f1} at the edge of the system and keep the inside free of defensive checks.",
    "Keep the migration reversible and run it on a copy of production data first.",
    "Put the thresholds in settings rather than in the code so you can tune them without a release.",
    "Measure before optimising: time the endpoint with and without the new code on realistic data.",
    "Name things after what they mean in {domain}, not after the library that implements them.",
    "Delete the code path you no longer need rather than keeping it behind a flag forever.",
    "Check the error path as carefully as the happy path; most bug reports will come from there.",
    "Write the README section for {t} while it is fresh, two or three paragraphs are enough.",
]
ASSISTANT_CLOSERS = [
    "If you paste the output of the test run after these changes, I can look at what remains.",
    "Happy to go deeper on any of these; the first two steps matter most.",
    "None of this needs a new framework, which keeps {p} easy to deploy.",
    "Once this is in place, {t} should stop being the part you worry about.",
]
CODE = [
    "```python\ndef load_{e}(path):\n    rows = []\n    with open(path, newline=\"\") as fh:\n        for row in "
    "csv.DictReader(fh):\n        if not row.get(\"{f1}\"):\n            continue\n        rows.append(row)\n"
    "    return rows\n```",
    "```sql\nSELECT {f0}, COUNT(*)\nFROM {e}\nWHERE {f2} IS NOT NULL\nGROUP BY {f0}\nORDER BY 2 DESC\nLIMIT 20;\n```",
    "```python\nclass {E1}Form(forms.ModelForm):\n    class Meta:\n        model = {E1}\n        fields = "
    "[\"{f0}\", \"{f1}\", \"{f2}\"]\n\n    def clean_{f1}(self):\n        value = self.cleaned_data[\"{f1}\"]\n"
    "        return value.strip() if isinstance(value, str) else value\n```",
    "```bash\n$ python manage.py check --deploy\n$ python manage.py migrate --plan | tail -5\n$ pytest -q "
    "tests/{e} -x\n```",
    "```yaml\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n"
    "      - run: pip install -r requirements.txt\n      - run: pytest -q\n```",
    "```python\n@shared_task(bind=True, max_retries=3)\ndef refresh_{e}(self, ids):\n    for {e1} in "
    "{E1}.objects.filter(pk__in=ids):\n        {e1}.refresh()\n```",
    "```text\nWARNING {e}.sync: skipped row 1182 ({f3} missing)\nWARNING {e}.sync: skipped row 1190 ({f3} missing)\n"
    "INFO {e}.sync: 4112 rows processed in 38.2s\n```",
]

SCHEMA_STEPS = ["I created the {e} table with {f0}, {f1} and {f2} as the first columns",
                "I added a {f3} column to {e} so we can filter on it",
                "I made {f1} nullable in {e}, because older records never had it",
                "I added a unique constraint on ({f0}, {f2}) in {e} to stop duplicates",
                "I dropped the old {f4} column from {e}, nothing reads it anymore"]
PERF_VALUES = ["{a} seconds", "{b} seconds", "{c} seconds"]


def project_words(project: tuple) -> dict:
    """A project's words as the templates name them: {p}roject, {u}ser, {e}ntities, {e1} one, {E1}, {domain}, {f0}..."""
    p, u, e, e1, fields, domain = project
    return dict(p=p, u=u, e=e, e1=e1, E1=e1.capitalize(), domain=domain, **{f"f{i}": f for i, f in enumerate(fields)})


def _fmt(text: str, ctx: dict) -> str:
    return text.format(**ctx)


def _said_date(dt: datetime) -> str:
    """LoCoMo's session date format, e.g. '1:56 pm on 8 May, 2023'."""
    hour = dt.hour % 12 or 12
    return f"{hour}:{dt.minute:02d} {'am' if dt.hour < 12 else 'pm'} on {dt.day} {dt:%B}, {dt.year}"


def _iso(dt: datetime) -> str:
    return f"{dt.day} {dt:%B} {dt.year}"


class Conversation:
    """One project's sessions as lists of turn plans; planted facts are attached to turns, then the text is built."""

    def __init__(self, rng: random.Random, index: int, project: tuple):
        self.rng, self.index = rng, index
        self.ctx = project_words(project)
        start = datetime(2024, 1, 8) + timedelta(days=rng.randrange(0, 200), hours=rng.randrange(8, 21),
                                                 minutes=rng.randrange(0, 60))
        self.dates = [start]
        for _ in range(SESSIONS - 1):
            self.dates.append(self.dates[-1] + timedelta(days=rng.randrange(3, 15), hours=rng.randrange(-3, 4),
                                                         minutes=rng.randrange(0, 60)))
        self.topics = rng.sample(SESSION_TOPICS, SESSIONS)
        # per session: list of user turns, each a list of planted sentences; assistant turns likewise
        self.user_plants: list[list[list[str]]] = [[[] for _ in range(rng.choice((3, 3, 4)))] for _ in range(SESSIONS)]
        self.asst_plants: list[list[list[str]]] = [[[] for _ in row] for row in self.user_plants]
        self.keys: dict[str, tuple[int, str, int]] = {}  # fact key -> (session, role, turn index within role)
        self.gold: dict[str, str] = {}  # fact key -> the fact as an observation
        self.fillers: dict[tuple[int, int], list[int]] = {}  # (session, user turn) -> indices into USER_FILLER
        self.qa: list[dict] = []

    def plant(self, key: str, session: int, sentence: str, role: str = "user", gold: str = "") -> None:
        """Put a sentence into a turn of the session that holds no planted sentence yet (or the least loaded); `gold`
        is the fact as an observation in the third person (the sentence itself when it names no one)."""
        plants = self.user_plants if role == "user" else self.asst_plants
        turns = plants[session]
        free = [i for i, t in enumerate(turns) if not t]
        i = self.rng.choice(free) if free else min(range(len(turns)), key=lambda j: len(turns[j]))
        turns[i].append(sentence)
        self.keys[key] = (session, role, i)
        self.gold[key] = _fmt(gold or sentence, self.ctx)

    def ask(self, qtype: str, question: str, answer: str, keys: list[str]) -> None:
        self.qa.append(dict(question=_fmt(question, self.ctx), answer=_fmt(answer, self.ctx), evidence=keys,
                            category=TYPE_CATEGORY[qtype], type=qtype))

    # --- the facts -----------------------------------------------------------------------------------------------
    def build(self) -> None:
        rng, c = self.rng, self.ctx
        early, late = list(range(0, 5)), list(range(5, SESSIONS))
        # Standing instructions, given early (they must hold in every later session).
        chosen = rng.sample(INSTRUCTIONS, 2)
        for n, ins in enumerate(chosen):
            self.plant(f"ins{n}", rng.choice(early[:3]), ins["say"], gold=INSTRUCTION_GOLD[ins["key"]])
            self.ask("standing", rng.choice(ins["direct"]), ins["answer"], [f"ins{n}"])
            self.ask("standing", rng.choice(ins["task"]), ins["answer"], [f"ins{n}"])
        self.ask("across-sessions", "Which standing rules has {u} set for the assistant's answers?",
                 "; ".join(i["answer"] for i in chosen), ["ins0", "ins1"])
        # A preference that changes.
        topic, old, new, why_old, why_new = rng.choice(PREFERENCE_CHANGES)
        s_old, s_new = rng.choice(early), rng.choice(late)
        self.plant("pref_old", s_old, f"For the {topic} I prefer {old}, mostly because {why_old}.",
                   gold=f"{{u}} prefers {old} for the {topic}.")
        self.plant("pref_new", s_new, f"Small update on the {topic}: I have switched to {new} and prefer it now, "
                                      f"{why_new}.", gold=f"{{u}} switched to {new} for the {topic}.")
        self.ask("update", f"Which {topic} does {{u}} prefer now?", new, ["pref_new"])
        self.ask("update", f"What did {{u}} use as the {topic} before switching?", old, ["pref_old"])
        self.ask("temporal", f"When did {{u}} say they had switched to {new}?", _iso(self.dates[s_new]), ["pref_new"])
        # Two facts corrected later.
        d1 = self.dates[0] + timedelta(days=rng.randrange(70, 90))
        d2 = d1 + timedelta(days=rng.choice((7, 14, 21)))
        for n, (ctopic, question, first, fixed, said, corrected) in enumerate(rng.sample(CORRECTIONS, 2)):
            first, fixed = first.format(d1=_iso(d1), d2=_iso(d2)), fixed.format(d1=_iso(d1), d2=_iso(d2))
            s1, s2 = rng.choice(early), rng.choice(late)
            self.plant(f"cor{n}_old", s1, said.format(v=first).capitalize() + ".",
                       gold=CORRECTION_GOLD[ctopic].replace("{v}", first))
            self.plant(f"cor{n}_new", s2, corrected.format(v=fixed).capitalize() + ".",
                       gold=CORRECTION_GOLD[ctopic].replace("{v}", fixed))
            self.ask("update", question, fixed, [f"cor{n}_new"])
        # The assistant's suggestions; the user later says one of them worked.
        (t1, sug1, ref1), (t2, sug2, _) = rng.sample(SUGGESTIONS, 2)
        s_sug1, s_sug2 = rng.choice(early), rng.choice(range(1, SESSIONS))
        self.plant("sug1", s_sug1, f"For {t1}, I would use {_fmt(sug1, c)}.", role="assistant")
        self.plant("sug2", s_sug2, f"On {t2}: my recommendation is {_fmt(sug2, c)}.", role="assistant")
        s_adopt = rng.choice(late)
        self.plant("adopt", s_adopt, f"By the way, I went with {ref1} for {t1} and it has been working well.",
                   gold=f"{{u}} went with {ref1.replace(' you ', ' the assistant ')} for {t1}.")
        self.ask("single-session", f"What did the assistant recommend to {{u}} for {t2}?", _fmt(sug2, c), ["sug2"])
        self.ask("across-sessions", f"Which of the assistant's suggestions did {{u}} adopt for {t1}, and what exactly "
                                    f"had the assistant proposed?", _fmt(sug1, c), ["sug1", "adopt"])
        # A thread across sessions: the schema of the main table.
        steps = rng.sample(range(SESSIONS), 4)
        steps.sort()
        for n, (s, step) in enumerate(zip(steps, SCHEMA_STEPS[:1] + rng.sample(SCHEMA_STEPS[1:], 3))):
            self.plant(f"schema{n}", s, _fmt(step, c).capitalize() + ".", gold=SCHEMA_GOLD[SCHEMA_STEPS.index(step)])
        self.ask("across-sessions", "How did the {e} table's schema change over the project?",
                 "see the four schema changes", [f"schema{n}" for n in range(4)])
        # A second thread: the load time of the main page, measured three times.
        a = round(rng.uniform(2.5, 4.5), 1)
        b, cc = round(a * rng.uniform(0.3, 0.5), 1), round(a * rng.uniform(0.08, 0.15), 1)
        psess = sorted(rng.sample(range(SESSIONS), 3))
        perf = [f"The {{e}} page now takes {a} seconds to load, which is too slow.",
                f"After the index the {{e}} page loads in {b} seconds.",
                f"With caching in place the {{e}} page is down to {cc} seconds."]
        for n, (s, text) in enumerate(zip(psess, perf)):
            self.plant(f"perf{n}", s, _fmt(text, c))
        self.ask("across-sessions", "How did the load time of {p}'s {e} page evolve?",
                 f"{a} s, then {b} s, then {cc} s",
                 ["perf0", "perf1", "perf2"])
        self.ask("single-session", "How long did the {e} page take to load after the index was added?", f"{b} seconds",
                 ["perf1"])
        # Events said with relative dates.
        ev = rng.sample(EVENTS, 3)
        esess = sorted(rng.sample(range(1, SESSIONS), 3))
        when = []
        for n, ((said, name, told), s) in enumerate(zip(ev, esess)):
            phrase, back = rng.choice(RELATIVE)
            self.plant(f"ev{n}", s, f"{phrase.capitalize()} {said}.", gold=EVENT_GOLD[name])
            when.append((name, _fmt(told, c), self.dates[s] - timedelta(days=back), phrase, s))
        name0, _, day0, phrase0, s0 = when[0]
        self.ask("temporal", f"When did {{u}} {name0}?",
                 _iso(day0) if phrase0 != "last week" else f"the week before {_iso(self.dates[s0])}", ["ev0"])
        order = [0, 1] if rng.random() < 0.5 else [1, 0]
        first = min((0, 1), key=lambda n: when[n][2])
        self.ask("temporal", f"Which came first for {{u}}: {when[order[0]][1]} or {when[order[1]][1]}?",
                 when[first][1], ["ev0", "ev1"])
        weeks = round(abs((when[2][2] - when[0][2]).days) / 7)
        self.ask("temporal", f"About how many weeks passed between {when[0][1]} and {when[2][1]}?",
                 f"about {weeks} weeks", ["ev0", "ev2"])
        last = max(range(3), key=lambda n: when[n][2])
        self.ask("temporal", "What was the most recent milestone {u} reported, and when did it happen?",
                 f"{when[last][1]}, {_iso(when[last][2])}", ["ev0", "ev1", "ev2"])
        # Details buried in long messages.
        fill = dict(port=rng.choice((8443, 8081, 9000, 5050, 7443)), name=rng.choice(NAMES),
                    repo=f"{c['p'].lower()}-{rng.choice(('core', 'web', 'app', 'server'))}",
                    bucket=f"{c['p'].lower()}-backups-{rng.randrange(10, 99)}", client=rng.choice(CLIENTS),
                    hour=rng.choice(("01", "02", "03", "04")), pool=rng.choice((10, 15, 20, 25)),
                    days=rng.choice((14, 30, 90)), secs=rng.choice((3, 5, 10)))
        for n, (said, question, answer) in enumerate(rng.sample(USER_DETAILS, 3)):
            self.plant(f"det{n}", rng.randrange(SESSIONS), f"For the record, {said.format(**fill)}.",
                       gold=DETAIL_GOLD[question].format(u="{u}", p="{p}", **fill))
            self.ask("single-session", question, answer.format(**fill), [f"det{n}"])
        said, question, answer = rng.choice(ASSISTANT_DETAILS)
        self.plant("adet", rng.randrange(SESSIONS), f"I would {said.format(**fill)}.", role="assistant")
        self.ask("single-session", question, answer.format(**fill), ["adet"])

    # --- the text --------------------------------------------------------------------------------------------------
    def _user_turn(self, s: int, i: int, plants: list[str]) -> str:
        rng, c = self.rng, dict(self.ctx, t=self.topics[s])
        body = rng.sample(USER_FILLER, rng.randint(5, 9))
        self.fillers[(s, i)] = [USER_FILLER.index(x) for x in body]
        for p in plants:  # each planted sentence somewhere in the middle of the message
            body.insert(rng.randint(1, len(body)), p)
        cut = len(body) // 2
        para = [_fmt(rng.choice(USER_OPENERS), c), " ".join(_fmt(x, c) if "{" in x else x for x in body[:cut]),
                " ".join(_fmt(x, c) if "{" in x else x for x in body[cut:])]
        if rng.random() < 0.4:
            para.append("What I tried so far:\n" + "\n".join(f"- {_fmt(x, c)}" for x in
                                                               rng.sample(USER_TRIED, rng.randint(2, 4))))
        if rng.random() < 0.45:
            para.append("Here is what I have right now:\n\n" + _fmt(rng.choice(CODE), c))
        para.append(rng.choice(USER_QUESTIONS))
        return "\n\n".join(para)

    def _assistant_turn(self, s: int, plants: list[str]) -> str:
        rng, c = self.rng, dict(self.ctx, t=self.topics[s])
        steps = [_fmt(x, c) for x in rng.sample(ASSISTANT_STEPS, rng.randint(4, 7))]
        for p in plants:
            steps.insert(rng.randint(0, len(steps)), p)
        parts = [_fmt(rng.choice(ASSISTANT_OPENERS), c),
                 "\n".join(f"{i}. {x}" for i, x in enumerate(steps, 1))]
        if rng.random() < 0.7:
            parts.append("For example:\n\n" + _fmt(rng.choice(CODE), c))
        parts.append(_fmt(rng.choice(ASSISTANT_CLOSERS), c))
        return "\n\n".join(parts)

    def render(self) -> dict:
        u = self.ctx["u"]
        conv = {"speaker_a": u, "speaker_b": "Assistant"}
        where: dict[tuple, str] = {}
        for s in range(SESSIONS):
            turns = []
            for i, (up, ap) in enumerate(zip(self.user_plants[s], self.asst_plants[s])):
                for role, plants in (("user", up), ("assistant", ap)):
                    dia = f"D{s + 1}:{len(turns) + 1}"
                    where[(s, role, i)] = dia
                    text = self._user_turn(s, i, plants) if role == "user" else self._assistant_turn(s, plants)
                    turns.append({"speaker": u if role == "user" else "Assistant", "dia_id": dia, "text": text})
            conv[f"session_{s + 1}_date_time"] = _said_date(self.dates[s])
            conv[f"session_{s + 1}"] = turns
        qa = [dict(q, evidence=sorted({where[self.keys[k]] for k in q["evidence"]},
                                      key=lambda d: tuple(int(x) for x in d[1:].split(":"))))
              for q in self.qa]
        return {"sample_id": f"product-{self.index:02d}-{self.ctx['p'].lower()}", "conversation": conv, "qa": qa,
                "observation": self._observations(where)}

    def _observations(self, where: dict) -> dict:
        """The gold that bench/extraction.py scores stored memories against, per session in LoCoMo's layout
        ([observation, dia_id] under the speaker): the facts planted in the user's turns and the durable facts of
        the filler where first said, each in the third person. The assistant's planted suggestions are not facts
        about the user, so they are not gold."""
        out, said = {}, set()
        for s in range(SESSIONS):
            facts = []
            for i in range(len(self.user_plants[s])):
                dia = where[(s, "user", i)]
                facts += [[self.gold[k], dia] for k, at in self.keys.items() if at == (s, "user", i)]
                for f in self.fillers[(s, i)]:
                    if f in FILLER_GOLD and f not in said:
                        said.add(f)
                        facts.append([_fmt(FILLER_GOLD[f], self.ctx), dia])
            out[f"session_{s + 1}_observation"] = {self.ctx["u"]: facts} if facts else {}
        return out


# --- pasted material: what makes real users' long messages long ----------------------------------------------------
# A share of the turns gets a long paste (a log, a source file, a list of requirements) after its first paragraph.
# Pastes only distract: they hold the project's own words and none of the questions' answers, and they carry times of
# day but no dates. The questions and their evidence turns are those of the set without pastes.
PASTE_SHARE = 0.4
LOG_LINES = [
    "INFO {e}.sync: processed {e1} {n} ({f0}={n2})", "WARNING {e}.validate: {f3} missing for {e1} {n}",
    "ERROR {e}.api: 500 on /api/{e}/{n}/ (KeyError: '{f1}')", "DEBUG db: SELECT * FROM {e} WHERE {f0} = {n}",
    "INFO worker: task refresh_{e} received for {n2} ids", "WARNING {e}.import: duplicate {f2} in row {n}",
    "INFO http: GET /{e}/?page={n3} 200", "DEBUG cache: miss for {e1}:{n}", "INFO {e}.export: wrote {n2} rows",
    "ERROR worker: retrying refresh_{e} in 30s (connection reset)", "INFO auth: session renewed for user {n3}",
]
LIST_ITEMS = [
    "a {e1} without {f1} is shown greyed out", "sorting by {f2} must be stable", "the {e} page keeps its filters",
    "exports include {f0}, {f1} and {f2} in that order", "an edit to {f3} is logged with who made it",
    "a deleted {e1} can be restored for thirty days", "the search box matches {f0} and {f4}",
    "bulk edits are limited to two hundred {e} at a time", "every {e1} page links back to its list",
    "empty states explain how to add the first {e1}", "the {f2} column is hidden on small screens",
]


def _paste(rng: random.Random, ctx: dict, role: str) -> str:
    """A user pastes logs, files and lists; the assistant writes out files and lists, never a log of its own."""
    kind = rng.choice(("log", "code", "list") if role == "user" else ("code", "list"))
    if kind == "log":
        start = rng.randrange(8 * 3600, 20 * 3600)
        lines = []
        for i in range(rng.randint(60, 140)):
            at = start + 7 * i + rng.randrange(7)
            n = dict(ctx, n=rng.randrange(100, 9999), n2=rng.randrange(1, 500), n3=rng.randrange(1, 40))
            lines.append(f"{at // 3600:02d}:{at // 60 % 60:02d}:{at % 60:02d} " + rng.choice(LOG_LINES).format(**n))
        return "The log from the last run:\n\n```text\n" + "\n".join(lines) + "\n```"
    if kind == "code":
        blocks = [_fmt(rng.choice(CODE), ctx) for _ in range(rng.randint(12, 24))]
        return "The whole file, in case it helps:\n\n" + "\n\n".join(blocks)
    items = [_fmt(item, ctx) for item in rng.sample(LIST_ITEMS, rng.randint(6, 10))]
    return "The requirements as they stand:\n" + "\n".join(f"- {item}" for item in items)


def pastes_add(data: list[dict], seed: int = SEED) -> list[dict]:
    """The same set with long pastes in a share of its turns (a seeded rng of its own, so the set without them is
    unchanged)."""
    rng = random.Random(seed * 7919 + 1)
    out = json.loads(json.dumps(data))
    for i, sample in enumerate(out):
        ctx = project_words(PROJECTS[i])
        u = ctx["u"]
        for key, turns in sample["conversation"].items():
            if not (key.startswith("session_") and isinstance(turns, list)):
                continue
            for turn in turns:
                if rng.random() < PASTE_SHARE:
                    role = "user" if turn["speaker"] == u else "assistant"
                    first, _, rest = turn["text"].partition("\n\n")
                    turn["text"] = "\n\n".join(x for x in (first, _paste(rng, ctx, role), rest) if x)
    return out


SPLIT_STEP = timedelta(minutes=10)  # between the sessions one session is split into: the same day, in order


def sessions_split(data: list[dict]) -> list[dict]:
    """The same set with every exchange (a user's message and the assistant's reply) a session of its own, ten minutes
    after the one before, on the same day: many short sessions, as users who come back for one question at a time
    leave them. Turns keep their ids, so the questions and their evidence are those of the set it was made from."""
    out = []
    for sample in json.loads(json.dumps(data)):
        conv, new, moved = sample["conversation"], {}, {}
        new["speaker_a"], new["speaker_b"] = conv["speaker_a"], conv["speaker_b"]
        number = 0
        for _, start, turns in sessions_of(conv):
            exchanges = [turns[i:i + 2] for i in range(0, len(turns), 2)]
            # Ending at the session's own time instead when starting there would reach the next day.
            if (start + SPLIT_STEP * (len(exchanges) - 1)).date() != start.date():
                start -= SPLIT_STEP * (len(exchanges) - 1)
            for j, exchange in enumerate(exchanges):
                number += 1
                new[f"session_{number}_date_time"] = _said_date(start + SPLIT_STEP * j)
                new[f"session_{number}"] = exchange
                moved.update({t["dia_id"]: number for t in exchange})
        observations = {}
        for facts_by in sample.get("observation", {}).values():
            for who, facts in facts_by.items():
                for fact, dia in facts:
                    observations.setdefault(f"session_{moved[dia]}_observation", {}).setdefault(who, []).append(
                        [fact, dia])
        sample["conversation"], sample["observation"] = new, observations
        sample["sample_id"] += "-split"
        out.append(sample)
    return out


def generate(seed: int = SEED) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i, project in enumerate(PROJECTS):
        conv = Conversation(random.Random(rng.randrange(2**32)), i, project)
        conv.build()
        out.append(conv.render())
    return out


def describe(data: list[dict]) -> dict:
    words = [len(t["text"].split()) for s in data for k, v in s["conversation"].items()
             if k.startswith("session_") and isinstance(v, list) for t in v]
    sessions = [sum(1 for k, v in s["conversation"].items() if k.startswith("session_") and isinstance(v, list))
                for s in data]
    types: dict[str, int] = {}
    for s in data:
        for q in s["qa"]:
            types[q["type"]] = types.get(q["type"], 0) + 1
    return {"conversations": len(data), "sessions_min": min(sessions), "messages": len(words),
            "median_words": statistics.median(words), "p90_words": sorted(words)[int(0.9 * len(words))],
            "questions": sum(types.values()), "by_type": types}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--quick", action="store_true", help="write to a temporary file instead (the set takes seconds)")
    p.add_argument("--pastes", action="store_true",
                   help=f"the same set with long pastes in a share of its turns (default out: {OUT_LONG.name})")
    p.add_argument("--split", action="store_true",
                   help=f"the same set with each exchange a session of its own (default out: {OUT_SPLIT.name})")
    args = p.parse_args(argv)
    if args.pastes and args.split:
        p.error("--pastes and --split make two different sets: choose one")
    if args.out == str(OUT) and (args.pastes or args.split):
        args.out = str(OUT_LONG if args.pastes else OUT_SPLIT)
    if args.quick:
        args.out = str(Path(tempfile.mkdtemp(prefix="product-set-")) / Path(args.out).name)
    data = generate(args.seed)
    if args.pastes:
        data = pastes_add(data, args.seed)
    if args.split:
        data = sessions_split(data)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(describe(data)))


if __name__ == "__main__":
    main()
