"""The orchestration layer: what crosses the conversations, context and memory packages happens here."""
