"""The staff admin's pages that read across apps: a surface above everything it shows, as the REST, OpenAI and MCP
surfaces are. An app keeps the admin of what only it and the layers below it hold (tenants/admin.py, memory/admin.py,
...); a page that reads, counts or changes another app's rows lives here (backoffice/admin/)."""
