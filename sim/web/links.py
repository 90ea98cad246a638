"""A Datasette plugin, registered in this process by :mod:`sim.web.datasette`: the columns that
name a row of another table (:data:`sim.store.browse.LINKS`) are shown as links to it (an event
to its delivery, a delivery to its message, anything to its task)."""

from __future__ import annotations

from datasette import hookimpl
from markupsafe import Markup, escape

from ..store.browse import LINKS


@hookimpl
def render_cell(value, column, table, database, datasette):
    target = LINKS.get((table, column))
    if target is None or value is None or value == "":
        return None
    other, how = target
    if how == "row":
        href = datasette.urls.row(database, other, str(value))
    else:
        href = datasette.urls.table(database, other) + f"?{column}={escape(str(value))}"
    return Markup(f'<a href="{escape(href)}">{escape(str(value))}</a>')
