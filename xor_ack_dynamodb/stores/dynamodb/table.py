"""Creating and checking the chains table (boto3): the helpers of ``_sync/table.py`` and
the table-name and key-schema checks of :mod:`.codec`, in one place for callers."""

from ._sync.table import create_table, describe, ensure_ttl
from .codec import check_table_name, missing_table_message, table_key

__all__ = ["create_table", "describe", "ensure_ttl", "check_table_name", "missing_table_message", "table_key"]
