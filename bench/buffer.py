"""Context-buffer benchmark: append and compose latency against the raw Redis round trip, and context size.

In one run, against the Redis of REDIS_URL and a scratch database:
  * the raw Redis round-trip floor: PING, and GET of a buffer-sized value (no parsing);
  * buffer append latency p50/p95 (`buffer_append_messages`: the committed rows read back from the database,
    one Lua write, and the anchor fold when one is due) at 10, 100 and 1,000 turns per session;
  * compose latency p50/p95 (`context_compose`, long-term retrieval excluded: it belongs to the memory
    benchmark) at the same sizes, beside the tokenizer's own cost of counting the composed messages once;
  * composed tokens against the full transcript's tokens at 200 turns.
Targets (issue 3): compose p95 ≤ 3 × floor + tokenizer cost; composed ≤ 10% of the transcript at 200 turns.
--quick: 10 and 50 turns, 40 for the size figure, few samples (seconds: shows the bench runs, not its figures).

    .venv/bin/python bench/buffer.py [--database-url URL] [--json out.json] [--quick]
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.django_env import bench_django_start, report_write  # noqa: E402

TOKEN_TURNS = 200
# Sessions per size (10, 100 and 1,000 turns), so that each size gets a few hundred appends near its final length.
PLAN = {10: 40, 100: 4, 1000: 1}
QUICK_PLAN, QUICK_TOKEN_TURNS = {10: 4, 50: 1}, 40


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--database-url", default="", help="scratch database (default: SQLite in a temp folder)")
    p.add_argument("--json", dest="json_path", help="also write the figures here")
    p.add_argument("--samples", type=int, default=200, help="compose samples per size")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--quick", action="store_true", help="tiny sizes: seconds, to show the bench still runs")
    args = p.parse_args(argv)
    if args.quick:
        p.set_defaults(samples=20)
        args = p.parse_args(argv)
    args.plan, args.token_turns = (QUICK_PLAN, QUICK_TOKEN_TURNS) if args.quick else (PLAN, TOKEN_TURNS)
    return args


def _setup_django(args, workdir: Path) -> None:
    # Extractive anchors: the figures must not depend on a model.
    bench_django_start(workdir=workdir, database_url=args.database_url, env={"LLM_BASE_URL": "", "LLM_MODEL": ""})


# --- a synthetic but varied conversation ---------------------------------------------------------------------

CITIES = ["Lisbon", "Oslo", "Kyoto", "Denver", "Nairobi", "Lima", "Tallinn", "Hanoi", "Porto", "Austin"]
THINGS = ["flight", "hotel", "rental car", "train pass", "museum ticket", "dinner table", "ferry", "tour"]
USER = [
    "I need a {thing} in {city} for {n} people on {day}, ideally under ${price}.",
    "Can you compare the two {thing} options you found for {city}? Which one is cheaper?",
    "I prefer something quiet and close to the center; I never want early mornings.",
    "Let's go with the second {thing}, the one at ${price}.",
    "What about cancellation rules for the {thing} in {city}?",
    "ok thanks",
    "My budget for the whole trip is ${big} at most, so keep that in mind.",
    "Actually change the date to {day}, and add one more person.",
    "Is breakfast included, and how far is it from the station?",
    "Great, that works. Next, look at the {thing} for {city}.",
]
ASSISTANT = [
    "I found three {thing} options in {city} for {day}: the first is ${price} with free cancellation, the second "
    "is ${price2} and includes breakfast, and the third is ${price3} but is about {n} km from the center. The "
    "second one fits your preference for a quiet place best.",
    "Compared side by side, option one costs ${price} and option two ${price2}; option two is {n} minutes closer "
    "to the station and has better reviews for noise. Both allow changes until 48 hours before {day}.",
    "Done: the {thing} in {city} is held for {n} people on {day} at ${price}. I will keep your budget of ${big} "
    "in mind for the remaining bookings and flag anything that would push you over it.",
    "Cancellation is free up to {n} days before arrival; after that the first night (${price}) is charged. "
    "Breakfast is served from 7 to 10 and the station is a {n}-minute walk.",
]
DAYS = ["Monday", "Tuesday", "Friday", "March 3", "April 12", "next weekend", "June 9"]


def _fill(template: str, rnd: random.Random) -> str:
    return template.format(thing=rnd.choice(THINGS), city=rnd.choice(CITIES), n=rnd.randint(2, 9),
                           day=rnd.choice(DAYS), price=rnd.randint(80, 400), price2=rnd.randint(80, 400),
                           price3=rnd.randint(80, 400), big=rnd.randint(1500, 5000))


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, int(round(p / 100 * (len(values) - 1)))))
    return values[k]


def _ms(values: list[float]) -> dict:
    return {"p50_ms": round(_pct(values, 50) * 1000, 3), "p95_ms": round(_pct(values, 95) * 1000, 3),
            "n": len(values)}


def main(argv=None) -> dict:
    args = _args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="continuum-bench-buffer-"))
    _setup_django(args, workdir)

    from django.conf import settings

    from context import buffer as buffer_mod
    from context.composer import context_compose
    from infra.redis_client import Keys, get_redis
    from infra.tokens import count_message_tokens, encoding, token_counts_clear
    from orchestration import messages as messages_mod
    from orchestration.messages import messages_append
    from orchestration.sessions import session_open
    from sessions.models import Message, Session
    from sessions.services import NewMessage
    from tenants.services import end_user_create, tenant_create

    rnd = random.Random(args.seed)
    r = get_redis()
    tenant = tenant_create(name="bench-buffer", slug=f"bench-buffer-{uuid.uuid4().hex[:8]}")

    # Time every buffer append the service makes after its commit, with the session's turn count (wrapped where
    # messages_append looks it up).
    appends: list[tuple[int, float]] = []
    real_append = messages_mod.buffer_append_messages
    turn_of: dict[str, int] = {}

    def timed_append(**kw):
        started = time.perf_counter()
        out = real_append(**kw)
        appends.append((turn_of.get(str(kw["session_id"]), 0), time.perf_counter() - started))
        return out

    messages_mod.buffer_append_messages = timed_append

    def build(turns: int) -> Session:
        user = end_user_create(tenant=tenant, external_id=f"u-{uuid.uuid4().hex[:10]}")
        session, _ = session_open(tenant=tenant, user=user)
        for t in range(1, turns + 1):
            turn_of[str(session.pk)] = t
            messages_append(tenant=tenant, session_id=session.pk, enqueue_extraction=False,
                            items=[NewMessage(role="user", content=_fill(rnd.choice(USER), rnd))])
            messages_append(tenant=tenant, session_id=session.pk, enqueue_extraction=False,
                            items=[NewMessage(role="assistant", content=_fill(rnd.choice(ASSISTANT), rnd))])
        session.refresh_from_db()
        return session

    try:
        sizes = tuple(args.plan)
        results: dict = {"token_turns": args.token_turns, "config": {
            "database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1],
            "anchor_every_turns": settings.CONTINUUM_ANCHOR_EVERY_TURNS,
            "anchor_keep_turns": settings.CONTINUUM_ANCHOR_KEEP_TURNS,
            "context_budget": settings.CONTINUUM_CONTEXT_BUDGET, "context_caps": settings.CONTINUUM_CONTEXT_CAPS}}
        by_size: dict[int, list[Session]] = {}
        append_samples: dict[int, list[float]] = {size: [] for size in sizes}
        build_started = time.perf_counter()
        for size in sizes:
            by_size[size] = []
            for _ in range(args.plan[size]):
                appends.clear()
                by_size[size].append(build(size))
                append_samples[size] += [d for t, d in appends if t > size * 0.8]
        results["build_seconds"] = round(time.perf_counter() - build_started, 1)

        # The floor: PING, and GET of the biggest buffer's bytes, unparsed.
        big = by_size[max(sizes)][0]
        big_key = Keys.session_buffer(tenant.pk, big.user_id, big.pk)
        buffer_mod.buffer_get(tenant_id=tenant.pk, user_id=big.user_id, session_id=big.pk)
        ping, get = [], []
        for _ in range(1000):
            t0 = time.perf_counter()
            r.ping()
            ping.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            r.get(big_key)
            get.append(time.perf_counter() - t0)
        results["floor"] = {"ping": _ms(ping), "get_buffer": _ms(get), "largest_buffer_bytes": r.strlen(big_key)}

        results["sizes"] = {}
        for size in sizes:
            sessions = by_size[size]
            compose, cold, tokenize, totals, floor = [], [], [], [], []
            questions = [_fill(rnd.choice(USER), rnd) for _ in range(args.samples)]
            keys = [Keys.session_buffer(tenant.pk, s.user_id, s.pk) for s in sessions]
            for i in range(20):  # warm-up, not measured
                context_compose(tenant=tenant, session=sessions[i % len(sessions)], new_input=questions[i])
            for i, question in enumerate(questions):
                session = sessions[i % len(sessions)]
                t0 = time.perf_counter()
                r.get(keys[i % len(keys)])  # the floor for this size, interleaved with the composes
                floor.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                ctx = context_compose(tenant=tenant, session=session, new_input=question)
                compose.append(time.perf_counter() - t0)
                t0 = time.perf_counter()  # the tokenizer itself, without the remembered counts
                [len(encoding().encode(m.get("content") or "", disallowed_special=())) for m in ctx.messages]
                tokenize.append(time.perf_counter() - t0)
                totals.append(ctx.total_tokens)
            for i, question in enumerate(questions):
                # cold: the remembered token counts dropped first (stored message counts still help)
                token_counts_clear()
                t0 = time.perf_counter()
                context_compose(tenant=tenant, session=sessions[i % len(sessions)], new_input=question)
                cold.append(time.perf_counter() - t0)
            results["sizes"][size] = {
                "sessions": len(sessions), "append": _ms(append_samples[size]), "compose": _ms(compose),
                "compose_cold": _ms(cold), "get_floor": _ms(floor),
                "tokenizer": _ms(tokenize), "composed_tokens_median": int(statistics.median(totals)),
                "buffer_bytes": r.strlen(keys[0]),
                "compose_target_ms": round(3 * _pct(floor, 95) * 1000 + _pct(tokenize, 95) * 1000, 3),
            }
            results["sizes"][size]["compose_within_target"] = (
                results["sizes"][size]["compose"]["p95_ms"] <= results["sizes"][size]["compose_target_ms"])
            results["sizes"][size]["cold_within_target"] = (
                results["sizes"][size]["compose_cold"]["p95_ms"] <= results["sizes"][size]["compose_target_ms"])

        # Context size at 200 turns (--quick: 40) against the full transcript.
        session = build(args.token_turns)
        transcript = [{"role": m.role, "content": m.content}
                      for m in Message.objects.unscoped().filter(session=session).order_by("seq")]
        ctx = context_compose(tenant=tenant, session=session, new_input=_fill(USER[1], rnd))
        full = count_message_tokens(transcript)
        results["tokens_at_token_turns"] = {
            "transcript_tokens": full, "composed_tokens": ctx.total_tokens,
            "ratio": round(ctx.total_tokens / full, 4), "breakdown": ctx.breakdown,
            "with_memories_cap_filled": ctx.total_tokens + settings.CONTINUUM_CONTEXT_CAPS.get("memories", 0),
            "ratio_with_memories_cap_filled": round(
                (ctx.total_tokens + settings.CONTINUUM_CONTEXT_CAPS.get("memories", 0)) / full, 4),
        }
    finally:
        messages_mod.buffer_append_messages = real_append
        keys = list(r.scan_iter(match=f"{settings.REDIS_KEY_PREFIX}:*", count=1000))
        if keys:
            r.delete(*keys)
        tenant.delete()

    _print(results)
    report_write(results, args.json_path, default=str)
    return results


def _print(res: dict) -> None:
    f = res["floor"]
    print(f"database: {res['config']['database']}; build of all sessions took {res['build_seconds']} s")
    print(f"Redis floor: PING p50 {f['ping']['p50_ms']} ms, p95 {f['ping']['p95_ms']} ms; GET of a "
          f"{f['largest_buffer_bytes']}-byte buffer p50 {f['get_buffer']['p50_ms']} ms, "
          f"p95 {f['get_buffer']['p95_ms']} ms")
    print("compose target = 3 x GET p95 (that size's buffer, interleaved) + tokenizer p95 (the composed messages "
          "counted once, uncached)")
    print(f"{'turns':>6} {'append p50':>11} {'append p95':>11} {'GET p95':>9} {'compose p50':>12} {'compose p95':>12} "
          f"{'cold p50':>9} {'cold p95':>9} {'tokenizer p95':>14} {'target':>8} {'ok':>3} {'cold ok':>7} "
          f"{'tokens':>7} {'bytes':>7}")
    for size, s in res["sizes"].items():
        print(f"{size:>6} {s['append']['p50_ms']:>9.3f}ms {s['append']['p95_ms']:>9.3f}ms "
              f"{s['get_floor']['p95_ms']:>7.3f}ms "
              f"{s['compose']['p50_ms']:>10.3f}ms {s['compose']['p95_ms']:>10.3f}ms "
              f"{s['compose_cold']['p50_ms']:>7.3f}ms {s['compose_cold']['p95_ms']:>7.3f}ms "
              f"{s['tokenizer']['p95_ms']:>12.3f}ms {s['compose_target_ms']:>6.2f}ms "
              f"{'yes' if s['compose_within_target'] else 'NO':>3} {'yes' if s['cold_within_target'] else 'NO':>7} "
              f"{s['composed_tokens_median']:>7} {s['buffer_bytes']:>7}")
    t = res["tokens_at_token_turns"]
    print(f"at {res['token_turns']} turns: composed {t['composed_tokens']} tokens vs transcript "
          f"{t['transcript_tokens']} "
          f"({t['ratio']:.1%}); with the memories section filled to its cap: {t['ratio_with_memories_cap_filled']:.1%}")
    print(f"breakdown: {t['breakdown']}")


if __name__ == "__main__":
    main()
