"""Locality (SIA 5.5): topology, HiveD buddy cells, the cell-aware cluster, migration, replays on cells."""
