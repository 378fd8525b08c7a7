"""AT Protocol identity: public keys (did:key, Multikey) and DID documents (did:plc, did:web)."""
