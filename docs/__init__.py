"""The docs site's generators and MkDocs hooks (the pages are the markdown files beside them)."""
