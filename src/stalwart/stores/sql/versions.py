"""The SQL of versions (:mod:`stalwart.stores.versions`), written once for both SQL stores.

The ``workers`` table has a row per serving worker, upserted at each of its
heartbeats; ``versions`` a row per application version seen, at most one
of them ``latest`` (a partial unique index says so).
"""

from __future__ import annotations

from ..base import RUN_COLUMNS
from ..versions import VERSION_COLUMNS, WORKER_COLUMNS
from .statements import FINISHED, Dialect

__all__ = ["VersionStatements"]


class VersionStatements:
    """The version statements in one dialect, built once."""

    def __init__(self, d: Dialect) -> None:
        q = d.sql
        self.beat = q(
            f"INSERT INTO {{t}}workers ({WORKER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (owner) DO UPDATE SET version = excluded.version, "
            "policies = excluded.policies, queues = excluded.queues, "
            "lease = excluded.lease, beat_at = excluded.beat_at"
        )
        # A version seen for the first time (the latest only when an operator says so).
        self.seen = q(
            "INSERT INTO {t}versions (version, latest, retired_at, first_seen) "
            "SELECT ?, FALSE, NULL, ? "
            "WHERE NOT EXISTS (SELECT 1 FROM {t}versions WHERE version = ?) "
            "ON CONFLICT DO NOTHING"
        )
        self.forget_silent = q("DELETE FROM {t}workers WHERE beat_at < ?")
        self.forget = q("UPDATE {t}workers SET lease = 0 WHERE owner = ?")
        self.workers = q(f"SELECT {WORKER_COLUMNS} FROM {{t}}workers ORDER BY version, owner")
        self.versions = q(
            f"SELECT {VERSION_COLUMNS} FROM {{t}}versions ORDER BY first_seen, version"
        )
        # Setting the latest is two statements (the partial unique index is
        # checked row by row): the old latest loses it, then the new one gets it.
        self.unlatest = q("UPDATE {t}versions SET latest = FALSE WHERE latest AND version <> ?")
        self.latest = q(
            "INSERT INTO {t}versions (version, latest, retired_at, first_seen) "
            "VALUES (?, TRUE, NULL, ?) "
            "ON CONFLICT (version) DO UPDATE SET latest = TRUE, retired_at = NULL"
        )
        self.retire = q(
            "INSERT INTO {t}versions (version, latest, retired_at, first_seen) "
            "VALUES (?, FALSE, ?, ?) "
            "ON CONFLICT (version) DO UPDATE SET latest = FALSE, "
            "retired_at = COALESCE({t}versions.retired_at, excluded.retired_at)"
        )
        self.cleared_of = q("SELECT cleared FROM {t}runs WHERE id = ?")
        self.clear = q(f"UPDATE {{t}}runs SET cleared = ? WHERE id = ? RETURNING {RUN_COLUMNS}")
        self.clear_fenced = q(
            f"UPDATE {{t}}runs SET cleared = ? WHERE id = ? AND fence = ? RETURNING {RUN_COLUMNS}"
        )
        self.pin = q(
            "UPDATE {t}runs SET code_version = ?, cleared = NULL, updated_at = ? "
            f"WHERE id = ? AND status NOT IN {FINISHED} RETURNING {RUN_COLUMNS}"
        )
        self.pin_fenced = q(
            "UPDATE {t}runs SET code_version = ?, cleared = NULL "
            f"WHERE id = ? AND fence = ? AND status NOT IN {FINISHED} RETURNING {RUN_COLUMNS}"
        )
