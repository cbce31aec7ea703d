"""bench/answers.py's own rules: what counts as unsupported, how questions are sampled, which product-set questions
are tasks, the oracle's turns rendered as the product renders memories, and the reader's answers kept by (model,
request) so a rerun asks only what changed."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

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
    from context.memory_section import memory_section_text

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


class _Reader:
    """An OpenAI client's chat.completions.create that answers with the request's question and counts its calls."""

    def __init__(self):
        self.calls = 0
        self.chat = self
        self.completions = self

    def create(self, *, model, messages, temperature, max_tokens):
        from types import SimpleNamespace

        self.calls += 1
        message = SimpleNamespace(content=f"{model}: {messages[-1]['content']}")
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])


def test_cache_asks_the_reader_again_only_when_the_model_or_the_request_changes(tmp_path):
    reader, path = _Reader(), tmp_path / "answers.sqlite3"
    cache = answers.AnswerCache(path)
    first = answers.reader_answer(reader=reader, cache=cache, model="m1", context="ctx", question="Who?")
    assert first[0] == "m1: Who?" and first[2] is False
    again = answers.AnswerCache(path)  # a later run, the same file
    assert answers.reader_answer(reader=reader, cache=again, model="m1", context="ctx", question="Who?") == \
        (first[0], first[1], True)
    answers.reader_answer(reader=reader, cache=again, model="m1", context="ctx, changed", question="Who?")
    answers.reader_answer(reader=reader, cache=again, model="m2", context="ctx", question="Who?")
    assert reader.calls == 3 and (again.hits, again.misses) == (1, 2)
    off = answers.AnswerCache(None)  # --no-cache
    answers.reader_answer(reader=reader, cache=off, model="m1", context="ctx", question="Who?")
    assert reader.calls == 4


def test_cache_is_shared_safely_between_threads(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    reader, cache = _Reader(), answers.AnswerCache(tmp_path / "answers.sqlite3")

    def ask(i):
        return answers.reader_answer(reader=reader, cache=cache, model="m", context=f"ctx {i % 10}", question="Q")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(ask, range(200)))
    assert cache.hits + cache.misses == 200 and reader.calls == cache.misses >= 10
    assert answers.AnswerCache(tmp_path / "answers.sqlite3").get(
        answers.AnswerCache.key("m", {"messages": [{"role": "system", "content": f"{answers.READER_SYSTEM}\n\nctx 3"},
                                                   {"role": "user", "content": "Q"}],
                                      "temperature": 0, "max_tokens": answers.READER_MAX_TOKENS})) is not None


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_second_quick_run_with_the_same_cache_asks_the_reader_nothing(bench_env, tmp_path):
    env, _ = bench_env
    server = answers.overlap_reader_serve()
    argv = [sys.executable, str(answers.REPO / "bench" / "answers.py"), "--quick",
            "--base-url", f"http://127.0.0.1:{server.server_address[1]}/v1", "--cache", str(tmp_path / "cache.sqlite3")]
    try:
        runs = []
        for n in (1, 2):
            run = subprocess.run([*argv, "--json", str(tmp_path / f"run{n}.json")], cwd=answers.REPO, env=env,
                                 capture_output=True, text=True, timeout=540)
            assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
            runs.append((server.completions, json.loads((tmp_path / f"run{n}.json").read_text())))
    finally:
        server.shutdown()
    (after_first, first), (after_second, second) = runs
    assert after_first == first["reader_calls"] == 24 and first["answers_from_cache"] == 0  # 2 sets x 4 x 3
    assert after_second == after_first and second["reader_calls"] == 0 and second["answers_from_cache"] == 24
    for name, result in second["sets"].items():
        assert [r["continuum"]["answer"] for r in result["answers"]] == \
            [r["continuum"]["answer"] for r in first["sets"][name]["answers"]]


def test_a_variant_names_settings_with_their_types():
    name, values = answers.variant_parse("no-profile:CONTINUUM_PROFILE_MAX_TOKENS=0,MEMORY_RETRIEVE_NOTES=false")
    assert name == "continuum[no-profile]"
    assert values == {"CONTINUUM_PROFILE_MAX_TOKENS": 0, "MEMORY_RETRIEVE_NOTES": False}
    assert answers.variant_parse("x:SOME_TEXT=abc")[1] == {"SOME_TEXT": "abc"}
    for bad in ("no-colon", ":A=1", "x:", "x:lower=1", "x:A"):
        with pytest.raises(ValueError):
            answers.variant_parse(bad)
