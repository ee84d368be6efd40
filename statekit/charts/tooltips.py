"""Typed tooltips for charts over inline data (which carries no types for Altair to infer).

Example:
    >>> import pandas as pd
    >>> [t.to_dict()["field"] for t in typed_tooltips(pd.DataFrame({"n": [1]}), ["n", "gone"])]
    ['n']
"""

from __future__ import annotations

from collections.abc import Iterable

import altair as alt
import pandas as pd


def typed_tooltips(data: pd.DataFrame, columns: Iterable[str],
                   time_format: str = "%Y-%m-%d %H:%M:%S") -> list[alt.Tooltip]:
    """One tooltip per column of ``columns`` present in ``data``: time, number or text."""
    tips = []
    for column in dict.fromkeys(columns):
        if column not in data.columns:
            continue
        dtype = data[column].dtype
        if pd.api.types.is_datetime64_any_dtype(dtype):
            tips.append(alt.Tooltip(f"{column}:T", format=time_format))
        elif pd.api.types.is_bool_dtype(dtype) or not pd.api.types.is_numeric_dtype(dtype):
            tips.append(alt.Tooltip(f"{column}:N"))
        elif pd.api.types.is_integer_dtype(dtype):
            tips.append(alt.Tooltip(f"{column}:Q", format=",d"))
        else:
            tips.append(alt.Tooltip(f"{column}:Q", format=",.3~f"))
    return tips
