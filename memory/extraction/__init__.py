"""The extraction pipeline: classify → extract (rules, optional LLM) → filter secrets → verify → persist."""
