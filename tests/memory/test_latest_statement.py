"""The latest statement of a thing ranks first: a value changed once, twice, or in a statement that names the old value
("migrated from X to Y"), whatever the phrasing of the change and however long the old statement, and the part of a
long pasted message that answers ranks first among its passages. Each case through the REST API in memory-service
mode (no model), every statement in a session of its own, checked in search and in the composed context."""
from __future__ import annotations

import pytest

from tests.memory.test_user_last_word import Service

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True


def memories_shown(context: str) -> str:
    """The retrieved memories of a composed context (the bridges of earlier sessions are the context's own)."""
    return context.partition("<memories>")[2].partition("</memories>")[0]


def test_a_value_changed_twice_ranks_the_newest_first(alice):
    ada = Service(alice)
    ada.tell("Our team standup is at 9:30.", "Our team standup is at 10:15 now.",
             "Update: the standup moved again, it is at 11:00 now.")
    found = ada.search("when is our team standup")
    assert "11:00" in found[0], found
    assert not any("10:15" in t or "9:30" in t for t in found), found
    shown = memories_shown(ada.context("When is our team standup?"))
    assert "11:00" in shown and "10:15" not in shown and "9:30" not in shown, shown
    before = ada.search("what time was our standup before")
    assert any("10:15" in t for t in before) and any("11:00" in t for t in before), before


def test_a_migration_from_the_old_value_ranks_above_the_statement_of_it(alice):
    ada = Service(alice)
    ada.tell("Our service runs on MySQL with about 40 tables.",
             "Heads up: last week we migrated the service from MySQL to PostgreSQL, so answer for PostgreSQL from "
             "now on.")
    found = ada.search("which database does our service run on")
    assert "PostgreSQL" in found[0], found
    assert not any("MySQL with about 40 tables" in t for t in found), found
    shown = memories_shown(ada.context("Which database does our service run on?"))
    assert "PostgreSQL" in shown and "about 40 tables" not in shown, shown


LONG_OLD = ("Our staging server runs on Hetzner in Falkenstein. It has 64 GB of RAM and two NVMe disks in a mirror. "
            "It also hosts the nightly backups, the metrics stack and the internal wiki, and Jonas looks after it "
            "on Fridays when the weekly patch window opens at 16:00.")

# (what was said first, what changed it, the question, the new value, words only the old statement holds)
CHANGES = [
    ("We deploy the web app with Jenkins on a VM in the office.", "We switched to GitHub Actions for deploying the "
     "web app.", "how do we deploy the web app", "GitHub Actions", "Jenkins on a VM"),
    ("The weekly sync with the design team is on Tuesdays at 15:00.", "From now on we meet the design team on "
     "Thursdays at 11:00 for our weekly sync.", "when is the weekly sync with the design team", "Thursdays",
     "Tuesdays"),
    ("The kids have swimming lessons on Saturday mornings at the Westside pool.", "Swimming lessons moved again: "
     "the kids now go on Sunday afternoons at the Eastgate pool.", "when are the kids' swimming lessons",
     "Eastgate", "Westside"),
    ("The invoices are sent from Xero at the end of each month.", "Update: invoices now go out from QuickBooks at "
     "the end of each month.", "what do we send invoices from", "QuickBooks", "Xero"),
    (LONG_OLD, "Heads up: we moved the staging server from Hetzner to AWS in Frankfurt last week.",
     "where does the staging server run", "AWS in Frankfurt", "Falkenstein"),
]


@pytest.mark.parametrize(("old", "new", "question", "now", "was"), CHANGES,
                         ids=["switched-to", "from-now-on", "moved-again", "update-now", "long-old-statement"])
def test_the_latest_statement_ranks_first_whatever_the_phrasing(alice, old, new, question, now, was):
    ada = Service(alice)
    ada.tell(old, new)
    found = ada.search(question)
    assert now in found[0], found
    assert not any(was in t for t in found), found
    shown = memories_shown(ada.context(question[0].upper() + question[1:] + "?"))
    assert now in shown and was not in shown, shown


def test_a_change_of_one_value_keeps_what_else_the_old_message_said(alice):
    """The long message is retired for its old value, not for the RAM, the backups or who looks after the server: a
    user who changes one thing must not lose the others."""
    ada = Service(alice)
    ada.tell(LONG_OLD, "Heads up: we moved the staging server from Hetzner to AWS in Frankfurt last week.")
    found = ada.search("who looks after the staging server and when is the patch window")
    assert any("Jonas" in t and "16:00" in t for t in found), found
    assert not any("Falkenstein" in t for t in found), found
    active = [m["text"] for m in ada.memories()]
    assert any("64 GB of RAM" in t for t in active), active
    assert not any("Falkenstein" in t for t in active), active
    shown = memories_shown(ada.context("How much RAM does the staging server have?"))
    assert "64 GB" in shown and "Falkenstein" not in shown, shown


def test_a_statement_about_something_else_leaves_the_old_one_in_place(alice):
    ada = Service(alice)
    ada.tell("Our team standup is at 9:30 in the small meeting room.",
             "We moved the retro to Friday at 16:00 now.")
    assert any("9:30" in t for t in ada.search("when is our team standup"))
    assert any("9:30" in m["text"] for m in ada.memories())


PASTED = ("Here is an overview of how our product and team are set up, pasted from our internal wiki. " + " ".join([
    "The mobile app is written in Kotlin for Android and Swift for iOS, sharing a Rust core for sync.",
    "Our main database is PostgreSQL 16 running on a db.r6g.2xlarge instance in eu-west-1.",
    "The marketing site is a static build deployed to Netlify on every merge to main.",
    "Customer support runs on Zendesk, with a macro for every common refund case.",
    "Payments go through Stripe, and refunds above 500 euros need a second approver from finance.",
    "The search feature uses OpenSearch 2.11 with a nightly reindex at 02:30 UTC.",
    "Our CI is GitHub Actions, and a full pipeline takes about 23 minutes on a cold cache.",
    "Feature flags are managed in LaunchDarkly, and stale flags are removed every sprint.",
    "The data warehouse is BigQuery, loaded every hour by Fivetran from the production replicas.",
    "Error tracking is Sentry, with alerts routed to the #incidents channel in Slack.",
    "The design system lives in Figma and is published as a React component library called Tide.",
    "Sprint planning happens every other Tuesday at 14:00, and retros on the Friday after.",
    "Backups of the main database are taken every six hours and kept for 35 days in a separate account.",
    "The API rate limit is 600 requests per minute per key, with bursts up to 1,000.",
    "We use Terraform for all infrastructure, with state stored in an S3 bucket locked by DynamoDB.",
    "On-call engineers get a 300 euro weekly stipend and a day off after a heavy week.",
    "The onboarding flow has five steps, and most users drop off at the bank connection step.",
    "Translations are handled by Lokalise, and we ship in eleven languages.",
    "Our largest customer is Northwind Logistics, with about 4,200 seats.",
    "Logs go to Datadog and are kept for fifteen days, except audit logs, which go to cold storage for a year.",
    "Email is sent through Postmark, with a separate stream for transactional and broadcast mail.",
    "The staging environment is rebuilt from scratch every Sunday night from the latest anonymised snapshot.",
]))


def test_the_passage_of_a_long_paste_that_answers_ranks_first(alice):
    ada = Service(alice)
    ada.tell(PASTED)
    found = ada.search("where are feature flags managed")
    assert "LaunchDarkly" in found[0], found
    assert "LaunchDarkly" in memories_shown(ada.context("Where are feature flags managed?"))


def test_no_bridge_quotes_a_replaced_value(alice):
    """The bridge of the session that said the old value was written while it held: the next session does not meet it
    there as current."""
    ada = Service(alice)
    ada.tell("Our team standup is at 9:30.", "Update: the standup moved, it is at 11:00 now.")
    assert "9:30" not in ada.context("When is our team standup?")
