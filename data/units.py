"""Time units shared by every layer (seconds are the product's unit of time).

Lives in the bottom layer so that `features`, `models`, `scheduler` and
`pipelines` all use one definition.
"""

from __future__ import annotations

#: Seconds in a day (86 400): the unit of the configs' ``*_day`` / ``*_days`` options.
DAY_S = 86_400.0
