"""dpkit.datasets — real public datasets that ship with dpkit.

Contents
--------
load_adult   UCI Adult (Census Income), Becker & Kohavi 1996, CC BY 4.0
"""

from dpkit.datasets.adult import ADULT_COLUMNS, load_adult

__all__ = ["load_adult", "ADULT_COLUMNS"]
