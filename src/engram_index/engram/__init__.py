"""The garden.engram face: records, XRPC routes, space credentials, identity and verified sync."""
