"""What a message says, computed: classify → extract (rules, optional LLM) → filter secrets → screen → verify against
what is stored. It writes nothing; memory.actions persists its decisions."""
