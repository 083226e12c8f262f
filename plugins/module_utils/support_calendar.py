# Copyright: gpufleet contributors
# Apache License 2.0
"""Days to end of life for a Kubernetes version, from :mod:`data_releases`."""
from __future__ import annotations

import datetime
from typing import Any, Dict, Mapping, Optional, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.data_releases import RELEASES, SOURCE
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import parse_version

SUPPORTED = "supported"
LAST_60_DAYS = "last-60-days"
OUT_OF_SUPPORT = "out-of-support"
UNKNOWN = "unknown"
WARN_DAYS = 60


def _date(text: str) -> datetime.date:
    return datetime.date.fromisoformat(text)


def parse_date(value: Any, what: str = "today") -> datetime.date:
    """A day given as YYYY-MM-DD (or already a date); :class:`InputError` naming ``what`` otherwise."""
    if isinstance(value, datetime.date):
        return value
    try:
        return datetime.date.fromisoformat(str(value))
    except ValueError:
        raise InputError("%s: %r is not a date; use YYYY-MM-DD" % (what, value)) from None


def support_status(version: Any, today: datetime.date,
                   releases: Optional[Mapping[str, Tuple[str, str]]] = None) -> Dict[str, Any]:
    """``{version, minor, released, eol, days_to_eol, status, source}`` for one cluster version.

    status: ``supported`` (more than 60 days left), ``last-60-days``, ``out-of-support`` (past EOL) or ``unknown``
    (the minor is not in the data file: update data_releases.py).
    """
    if not isinstance(today, datetime.date):
        raise InputError("today: expected a date, got %r" % (today,))
    table = RELEASES if releases is None else releases
    parsed = parse_version(version)
    minor = parsed.minor_str
    entry = table.get(minor)
    if entry is None:
        return {"version": str(parsed), "minor": minor, "released": None, "eol": None, "days_to_eol": None,
                "status": UNKNOWN, "source": SOURCE,
                "message": "v%s is not in the release calendar; update plugins/module_utils/data_releases.py" % minor}
    released, eol = _date(entry[0]), _date(entry[1])
    days = (eol - today).days
    if days < 0:
        status = OUT_OF_SUPPORT
        message = "v%s reached end of life on %s (%d days ago)" % (minor, eol, -days)
    elif days <= WARN_DAYS:
        status = LAST_60_DAYS
        message = "v%s reaches end of life on %s, in %d days" % (minor, eol, days)
    else:
        status = SUPPORTED
        message = "v%s is supported until %s (%d days)" % (minor, eol, days)
    return {"version": str(parsed), "minor": minor, "released": str(released), "eol": str(eol),
            "days_to_eol": days, "status": status, "source": SOURCE, "message": message}
