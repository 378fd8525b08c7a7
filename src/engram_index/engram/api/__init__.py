"""The XRPC service: routing, parameters, the error envelope and one module per query."""
