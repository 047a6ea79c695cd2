"""SIA (Figures 7 and 8, online adaptation 5.3) and its registered variants."""
