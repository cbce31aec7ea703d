"""A claimed action names what it was done to; a call covers the claim only when it can do the action and what it
took or returned holds those names."""
from __future__ import annotations

import pytest

from infra.claims import SEARCH, STORE, TRANSACT, action_claims, claim_covered, claim_names


def only_claim(sentence: str):
    claims = action_claims(sentence)
    assert len(claims) == 1, claims
    return claims[0]


@pytest.mark.parametrize("sentence, names", [
    ("The assistant updated the goal to a flight from SFO to Newark.", {"sfo", "newark"}),
    ("I booked seat 14C on the Delta flight.", {"14c", "delta"}),
    # What follows the clause is about something else.
    ("I found three flights to Newark, but Dana would rather fly to Boston.", {"newark"}),
    ("I searched for flights that leave on Tuesday at 7am on December 5.", set()),  # days and times, not names
    ("I saved Dana's preference for aisle seats.", {"dana"}),
    ("I have saved it.", set()),
])
def test_the_names_a_claim_gives(sentence, names):
    assert claim_names(only_claim(sentence)) == names


def test_a_call_covers_a_claim_only_on_what_it_took_or_returned():
    claim = only_claim("The assistant updated the goal to a flight to Newark.")
    assert claim.action == STORE
    set_to_nyc = ({STORE}, '{"goal": "Find a flight from SFO to NYC next Tuesday"}')
    set_to_newark = ({STORE}, '{"goal": "Find a flight from SFO to Newark next Tuesday"}')
    search_newark = ({SEARCH}, '{"to": "Newark"} 3 flights')
    assert not claim_covered(claim, [set_to_nyc])
    assert not claim_covered(claim, [search_newark])  # Newark was searched, not stored
    assert claim_covered(claim, [set_to_nyc, set_to_newark])


def test_a_claim_without_names_needs_only_the_action():
    claim = only_claim("Your flight has been booked.")
    assert claim.action == TRANSACT
    assert claim_covered(claim, [({TRANSACT}, "{}")])
    assert not claim_covered(claim, [({STORE}, "{}")])


def test_the_users_own_name_is_no_name_to_match():
    claim = only_claim("I saved Dana's preference for aisle seats.")
    call = ({STORE}, '{"text": "The user prefers aisle seats."}')
    assert not claim_covered(claim, [call])
    assert claim_covered(claim, [call], ignore=("Dana",))
