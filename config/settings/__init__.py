"""Settings package: base plus one module per environment (local, test, production)."""
