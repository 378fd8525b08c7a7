"""garden.engram's search hits written as JSON in one compiled call (_views.c)."""


from engram_index.engine.types import Hit

def hits_json(hits: list[Hit], mode: str, fields: list[bytes]) -> bytes | None:
    """The JSON array of the hits' memoryViews (fields[i]: hit i's memory fields), as views.hit_json writes
    each; None when a hit holds a value it does not write."""

