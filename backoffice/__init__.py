"""The staff admin: every admin page (backoffice/admin/, one module per page or model, and the toolkit they are built
from), the playground at /admin/playground/, and the read models they show (a receipt as a page, a session's
transcript, a user's extraction yield, the playground's turn). A surface above everything it shows, as the REST,
OpenAI and MCP surfaces are: it reads across apps and changes rows only through their owners' services."""
