"""REST endpoints of the memory app: search (retrieval) and end-user controls."""
