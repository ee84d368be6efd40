"""Changelog topics: every committed state change in Kafka, read back, and compacted."""
