"""The OpenAI-compatible surface at /v1 (chat completions, responses, models): the protocol's parsing, bodies,
server-sent events and sessions. The turn it runs is assistant/'s (assistant.turns.turn_run)."""
