"""The Kindgi memory face: scoped facts with revisions, retrieve in four modes, idempotency, tokens."""
