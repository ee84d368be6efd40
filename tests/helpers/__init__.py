"""Helpers the tests share, none of them a test: imported as ``helpers.<module>``
(``tests/`` is on ``sys.path``: pyproject.toml's ``pythonpath``).

Some run as scripts too (``filestream``, ``livejob``: a Spark job in a process of its own;
``fuzz_hooks``: loaded by ``schemathesis run``)."""
