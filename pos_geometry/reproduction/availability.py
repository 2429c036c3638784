"""Which tables the reproduction can use here: re-exported from :mod:`pos_geometry.sources.locations`."""

from pos_geometry.reproduction.located import Located, locate
from pos_geometry.sources.locations import (
    DATA_ENV,
    REAL_TABLES,
    CacheStatus,
    cache_status,
    fetch_command,
    find_data_dir,
)

__all__ = [
    "DATA_ENV",
    "REAL_TABLES",
    "CacheStatus",
    "Located",
    "cache_status",
    "fetch_command",
    "find_data_dir",
    "locate",
]
