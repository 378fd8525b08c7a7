"""engram-index: a hybrid memory index for garden.engram spaces."""

__version__ = "0.1.0"
