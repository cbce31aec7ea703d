"""REST views of the flows orchestration owns: sessions and their messages, imports, context, erasure."""
