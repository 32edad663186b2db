"""dynscope for agents: ``dynscope mcp`` serves the Model Context Protocol over stdio (docs/mcp.md).

A front end like the command line: ``tools`` answers each tool with a documented JSON document
(summary JSON, fix JSON, ...), ``served`` keeps every path a client names inside the directory
the server was given, ``server`` puts the tools on the mcp SDK's server.
"""
