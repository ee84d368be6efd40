"""Spark side of statekit: the session helper and the Python Kafka source."""
