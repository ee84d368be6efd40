"""How chart data travels: inline JSON values, so a saved chart needs no files and no network.

Example:
    >>> import pandas as pd
    >>> inline(pd.DataFrame({"n": [1, 2]})).to_dict()
    {'values': [{'n': 1}, {'n': 2}]}
"""

from __future__ import annotations

import altair as alt
import pandas as pd
from altair.utils.data import to_values


def inline(frame: pd.DataFrame) -> alt.InlineData:
    """``frame`` as inline JSON values (times as ISO text, NA as null).

    Charts aggregate in pandas first, so what is inlined stays small; inline data
    also avoids Altair's row limit for its default data transformer.
    """
    return alt.InlineData(values=to_values(frame.reset_index(drop=True))["values"])
