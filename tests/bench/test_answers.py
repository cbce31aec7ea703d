"""bench/answers.py's own rules: what counts as unsupported, how questions are sampled, which product-set questions
are tasks, and the oracle's turns rendered as the product renders memories."""
from __future__ import annotations

import json
from collections import Counter

from bench import answers, locomo, product_set


def test_an_answer_word_in_no_context_is_unsupported_and_an_inflection_is_not():
    contexts = ["Melanie: I carve out me-time to prioritize running.", "Noah: Harriet is the client's contact."]
    assert answers.unsupported_words("She prioritizes running", contexts) == []
    assert answers.unsupported_words("the clients contact", contexts) == []
    assert answers.unsupported_words("Harriet, in Glasgow, since 2021", contexts) == ["glasgow", "2021"]
    assert answers.unsupported_words("Not mentioned in the context.", contexts) == []  # an abstention claims nothing
    assert answers.unsupported_words("a runner", contexts) == ["runner"]  # sharing four letters is not enough


def test_sample_gives_each_type_its_share_and_a_larger_one_keeps_the_smaller():
    pool = [("a", i) for i in range(60)] + [("b", i) for i in range(30)] + [("c", i) for i in range(3)]
    sample = answers.stratified_sample(pool, 10, seed=7, key=lambda item: item[0])
    assert Counter(t for t, _ in sample) == {"a": 6, "b": 3, "c": 1}  # c is at least one though its share is 0.3
    assert len(set(sample)) == 10
    assert sample == answers.stratified_sample(pool, 10, seed=7, key=lambda item: item[0])
    assert sample != answers.stratified_sample(pool, 10, seed=8, key=lambda item: item[0])
    for n in (11, 20, 50):
        assert set(sample) <= set(answers.stratified_sample(pool, n, seed=7, key=lambda item: item[0]))
    assert len(answers.stratified_sample(pool, 500, seed=7, key=lambda item: item[0])) == len(pool)


def test_product_set_task_probes_are_told_from_questions():
    data = json.loads(answers.PRODUCT_DATASET.read_text())
    standing = [qa["question"] for s in data for qa in s["qa"] if qa["type"] == "standing"]
    tasks = [q for q in standing if answers.is_task_probe(q)]
    assert len(tasks) == len(standing) // 2  # each instruction is asked once directly and once as a task
    directs = {d.split("{")[0] for ins in product_set.INSTRUCTIONS for d in ins["direct"]}
    assert not any(q.startswith(tuple(directs)) for q in tasks)


def test_oracle_turns_render_with_their_session_date_speaker_and_resolved_dates():
    from context.composer import memory_section_text

    class Embedder:
        def embed(self, texts):
            return [[float(len(t)), 1.0] for t in texts]

    conv = json.loads(locomo.QUICK_DATASET.read_text())[0]["conversation"]
    turns = answers.Conversation(conv, Embedder())
    text = memory_section_text(turns.evidence(["D1:1", "D1:1"]))
    assert text.startswith("<memories>") and text.rstrip().endswith("</memories>")
    assert "\n3 March 2023, session 1:\n- Nadia: Hi Owen! It's been ages. I finally adopted a dog last weekend" in text
    assert '"last weekend" = ' in text and text.count("Nadia: Hi Owen") == 1
    dense = turns.dense("Which dog did Nadia adopt?", 120, Embedder())
    assert dense and memory_section_text(dense).count("\n- ") == len(dense)
