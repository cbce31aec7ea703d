"""The REST surface, /api/v1 (api/urls.py routes it), one module per resource, and the OpenAI-compatible surface at
/v1 (api/openai/). A surface above everything it calls: each view validates, calls one service or selector of the
package that owns the work, and serializes; no domain logic lives here."""
