"""statekit: see inside a stream processor's state."""

__version__ = "0.1.0"
