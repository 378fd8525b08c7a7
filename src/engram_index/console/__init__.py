"""One access layer for agents and people: the MCP server and the web page, over the faces' own HTTP APIs."""
