"""Dates said in a message resolve against the message's own day; a word that only looks like a date stays a word."""
from datetime import date, datetime, timezone

import pytest

from memory.extraction.rules import resolve_dates

MONDAY = date(2023, 5, 8)


@pytest.mark.parametrize("text,expected", [
    ("I went yesterday.", [("yesterday", "2023-05-07", "day")]),
    ("We met the day before yesterday.", [("the day before yesterday", "2023-05-06", "day")]),
    ("It was last Friday.", [("last friday", "2023-05-05", "day")]),
    ("I joined last Tues and leave next Wed.", [("last tues", "2023-05-02", "day"), ("next wed", "2023-05-10", "day")]),
    ("Not this Monday but next Monday.", [("this monday", "2023-05-08", "day"), ("next monday", "2023-05-15", "day")]),
    ("It was busy last week.", [("last week", "2023-05-01", "week")]),
    ("Last weekend we hiked.", [("last weekend", "2023-05-01", "weekend")]),
    ("I moved last month.", [("last month", "2023-04-01", "month")]),
    ("I'll retire next year.", [("next year", "2024-01-01", "year")]),
    ("I got a puppy two weeks ago.", [("two weeks ago", "2023-04-24", "week")]),
    ("I started 3 days ago.", [("3 days ago", "2023-05-05", "day")]),
    ("I started painting ten years ago.", [("ten years ago", "2013-01-01", "year")]),
    ("The party is on 12 May, and the trip on June 3rd, 2024.",
     [("12 may", "2023-05-12", "day"), ("june 3rd, 2024", "2024-06-03", "day")]),
])
def test_phrases_resolve_against_the_message_day(text, expected):
    got = [(d["phrase"], d["date"], d["granularity"]) for d in resolve_dates(text, MONDAY)]
    assert got == expected


@pytest.mark.parametrize("text", [
    "I saw her a few days ago.",          # no number the parser can count
    "That is where I last sat.",          # "sat" and "sun" are words, not weekdays
    "Let the sun in this sun-filled room.",
    "June 31 does not exist.",
    "Nothing dated here at all.",
])
def test_words_that_only_look_like_dates_give_nothing(text):
    assert resolve_dates(text, MONDAY) == []


def test_an_aware_timestamp_resolves_on_its_own_day():
    late = datetime(2023, 5, 8, 23, 59, tzinfo=timezone.utc)
    assert resolve_dates("I went yesterday and will go tomorrow.", late) == [
        {"phrase": "yesterday", "date": "2023-05-07", "granularity": "day"},
        {"phrase": "tomorrow", "date": "2023-05-09", "granularity": "day"}]


def test_a_phrase_said_twice_is_listed_once():
    assert len(resolve_dates("Last week was long. Really, last week was long.", MONDAY)) == 1


@pytest.mark.parametrize("text,expected", [
    # Reported: the weekday before the message's day (a Monday), however far back in the week.
    ("Dana had a baby boy on Tuesday.", [("on tuesday", "2023-05-02", "day")]),
    ("Hopwell launched the beer on Thursday night.", [("on thursday", "2023-05-04", "day")]),
    ("It was on Sunday, so quiet.", [("on sunday", "2023-05-07", "day")]),
    ("I finally called her on Monday.", [("on monday", "2023-05-01", "day")]),  # not the message's own day
    # Looking ahead: the weekday after it.
    ("We'll fly out on Friday.", [("on friday", "2023-05-12", "day")]),
    ("The interview is going to be on Wednesday.", [("on wednesday", "2023-05-10", "day")]),
    ("See you on Monday!", [("on monday", "2023-05-15", "day")]),
    # An -ed word after "the" or "your" describes a noun; "can" looks ahead.
    ("At your planning meeting on Monday you can present the proposed schedule.", [("on monday", "2023-05-15", "day")]),
])
def test_a_bare_weekday_resolves_by_what_its_sentence_says_of_time(text, expected):
    got = [(d["phrase"], d["date"], d["granularity"]) for d in resolve_dates(text, MONDAY)]
    assert got == expected


@pytest.mark.parametrize("text", [
    "I swim on Tuesdays.",                          # a habit, no day
    "My class is on Thursday.",                     # no tense to read: which Thursday is unsure
    "I went there on Friday and will go back on Friday.",  # both tenses in one sentence
    "The finished report is on Friday's agenda.",  # "finished" describes the report: no tense to read
])
def test_a_bare_weekday_without_a_clear_tense_names_no_day(text):
    assert resolve_dates(text, MONDAY) == []


def test_a_weekday_reads_the_tense_of_its_own_sentence_not_of_the_text_around_it():
    text = "## Plan\nWe tested the parser and fixed two bugs\n\n## Next\nPresent the schedule on Monday"
    assert resolve_dates(text, MONDAY) == []  # the heading's list is another sentence; its own says no tense
    reported = "We tested the parser. Dana had the baby on Tuesday."
    assert [d["date"] for d in resolve_dates(reported, MONDAY)] == ["2023-05-02"]
