"""The settings that fit the embedded local model (a 0.5B or 1.5B model on llama-server, a few CPU cores), in one place.

scripts/run exports them (`scripts/local_model.py env` prints them; a value already in the environment wins), and
the real-model tests and benchmarks apply them, so all three meet the model configured the same way. Each entry is
an ordinary setting (config/settings/base.py says what it does). Plain Python, no imports: scripts/local_model.py
reads it before anything is installed.

Why these values: the model generates 10-20 tokens/s, so calls are short and a timed-out call is not retried; one tool
step a turn, then the answer (shown its own call and result, a small model calls again rather than answer);
temperature 0 (sampled at a server's usual 0.8 it invents arguments and calls); one background slot beside the
turn's, with background work held while a user waits; no query rewrite (a model call per context read); and the
JSON-schema length bounds sent along, which llama-server compiles into its grammar, so a string or a list cannot
run on until max_tokens (a repeat loop inside one string was the small models' commonest failure); an answer cut by
max_tokens is closed by the one repair try, keeping its complete items.
"""

LOCAL_PROFILE = {
    "LLM_TIMEOUT_SECONDS": 120,
    "LLM_MAX_RETRIES": 0,
    "LLM_MAX_TOKENS": {"default": 384, "turn": 160, "closing": 160, "rewrite": 96, "extraction": 256,
                       "bridge": 320, "anchor": 320, "consolidate": 256, "note": 320},
    "LLM_BACKGROUND_CONCURRENCY": 1,
    "LLM_SCHEMA_LENGTH_LIMITS": True,
    "ASSISTANT_MAX_STEPS": 1,
    "ASSISTANT_WALL_CLOCK_SECONDS": 240,
    "ASSISTANT_LOOP_TOKEN_BUDGET": 6000,
    "ASSISTANT_TEMPERATURE": 0.0,
    "MEMORY_QUERY_REWRITE": False,
}


def profile_apply(settings) -> None:
    """Set every entry on a settings object (django.conf.settings, or pytest-django's `settings` fixture)."""
    for name, value in LOCAL_PROFILE.items():
        setattr(settings, name, value)


def _shell_value(value) -> str:
    import json

    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def profile_exports() -> list[str]:
    """Shell lines that export each setting unless the environment already has it."""
    import shlex

    return [f'[ -n "${{{name}:-}}" ] || export {name}={shlex.quote(_shell_value(value))}'
            for name, value in LOCAL_PROFILE.items()]
