"""Reading Vega-Lite specs in chart tests: their data rows and their marks."""

from __future__ import annotations


def rows(spec: dict) -> list[dict]:
    """All data rows of a chart spec (inline datasets or inline values)."""
    found = [row for values in spec.get("datasets", {}).values() for row in values]
    return found or list(spec.get("data", {}).get("values", []))


def marks(spec: dict) -> list[str]:
    """The mark types anywhere in a spec (layers, facets, concatenations)."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            if "mark" in node:
                mark = node["mark"]
                found.append(mark["type"] if isinstance(mark, dict) else mark)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(spec)
    return found
