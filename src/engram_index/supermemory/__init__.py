"""The supermemory v5 face: namespaces, documents → chunks → memories, and v5 search over the shared core."""
