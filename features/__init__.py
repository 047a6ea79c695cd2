"""Table 9 features (periodic, recent arrivals, recent and future completions) built with polars."""
