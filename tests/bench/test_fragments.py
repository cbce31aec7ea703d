"""bench/fragments.py's own rules: what counts as a mid-token start, a heading or a fence alone, and a duplicate."""
from __future__ import annotations

from bench import fragments
from bench.fragments import Passage

SOURCE = ("The model keeps the flag:\n\nclass Entry(db.Model):\n    archived = db.Column(db.Boolean, default=False)\n\n"
          "### Routes\n```python\n# the list view\n@app.route('/entries')\ndef entries():\n    return list_all()\n"
          "```\n")


def test_a_start_is_mid_token_when_the_message_has_no_blank_before_it():
    cut = SOURCE.index("=False)")
    assert fragments.starts_mid_token(SOURCE, cut)
    assert not fragments.starts_mid_token(SOURCE, SOURCE.index("class Entry"))
    assert not fragments.starts_mid_token(SOURCE, 0)


def test_passages_are_located_in_order_and_through_a_fence_the_splitter_added():
    passages = ["The model keeps the flag:", "=False)", "```python\n@app.route('/entries')\ndef entries():\n```"]
    at = fragments.passage_offsets(SOURCE, passages)
    assert at == [0, SOURCE.index("=False)"), SOURCE.index("@app.route")]
    # Blank lines collapsed on the way (filler dropped) still find their place.
    assert fragments.passage_offsets(SOURCE, ["The model keeps the flag: class Entry(db.Model):"]) == [0]


def test_a_heading_or_a_fence_alone_and_nothing_more():
    assert fragments.is_heading_only("### Routes")
    assert fragments.is_heading_only("**Step 2:**\n\n## Templates")
    assert not fragments.is_heading_only("### Routes\nThe list view returns every entry.")
    assert fragments.is_fence_only("```html\n<!")
    assert fragments.is_fence_only("```html <!")  # a block flattened onto one line
    assert fragments.is_fence_only("### Routes\n```python")
    assert not fragments.is_fence_only("```python from flask import Flask")
    # Inside a block a "# comment" is code, not a heading.
    assert not fragments.is_fence_only("```python\n# the list view\n```")
    assert not fragments.is_heading_only("```python\n# the list view\n```")


def test_duplicates_are_counted_by_where_the_first_telling_is():
    sources = {"m1": "Run flask db upgrade first. Then restart.", "m2": "Run flask db upgrade first.",
               "m3": "Run   flask db upgrade first."}
    passages = [Passage("assistant", "s1", "m1", "Run flask db upgrade first."),
                Passage("assistant", "s1", "m1", "Run flask db upgrade first."),
                Passage("assistant", "s1", "m2", "Run flask db upgrade first."),
                Passage("assistant", "s2", "m3", "Run   flask db upgrade first.")]
    got = fragments.passages_judge(sources=sources, passages=passages, bound=160, count_tokens=lambda t: len(t.split()))
    f = got["assistant"]
    assert dict(f.duplicates) == {"same message": 1, "same session": 1}
    assert f.near_duplicates == 1
    assert (f.passages, f.split_messages, f.mid_token) == (4, 1, 0)
