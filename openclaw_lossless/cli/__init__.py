"""The command line (``openclaw-lossless ...``, ``python -m openclaw_lossless``) and the MCP server it starts.

``main`` holds the parser and the commands on the store; ``serve``, ``maintenance`` and ``migrate`` the
commands of their kind; ``common`` what they share; ``store_access`` how a command reaches the store (through
the running sidecar that serves it, else the file itself); ``mcp_server`` the ``mcp`` command's stdio server.
"""
