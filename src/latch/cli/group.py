"""``latch group [NAME_OR_ROOT_SESSION] [--json]``: the /group view of an agent group.

It reduces the group's durable events with :meth:`latch.agent.group.GroupState.replay` (the reducer
the UI sidebar uses too), so a live group and a resumed one print the same: each task with its
dependencies, owner and status (``ready``, ``blocked``, ``claimed``, ``completed``, ``failed``), the
members and the message counts. Without ROOT_SESSION: the newest session that has group events; a member's session shows the group it
belongs to; a session in no group is one error line (exit 1). The group may be named by the NAME ``latch run --group
NAME`` gave it (:func:`latch.agent.group.resolve_group`), as ``latch run --group NAME --worker`` does.
"""

from __future__ import annotations

import click

from ..agent.group import GROUP_KINDS, Group, group_view, resolve_group
from ..textsafe import Table, cell, console, dumps, plural, safe
from .main import AppContext, pass_app

__all__ = ["register"]


def register(cli: click.Group) -> None:
    @cli.command("group")
    @click.argument("root", required=False)
    @click.option("--json", "as_json", is_flag=True, help="Print the group as JSON.")
    @pass_app
    def group_cmd(app: AppContext, root: str | None, as_json: bool) -> None:
        """Show the agent group rooted in ROOT (tasks, owners, members, messages)."""
        store = app.store(create=False)
        if root is None:
            rows = list(store.events(kinds=list(GROUP_KINDS)))
            if not rows:
                raise click.ClickException("no agent group in this store (no session has group events)")
            root = rows[-1].session_id
        try:  # the NAME latch run --group gave it, else a session id or prefix
            group = Group(store, resolve_group(store, root))
        except KeyError as exc:
            raise click.ClickException(str(exc.args[0])) from None
        view = group_view(store, group.root)  # a member's session shows the group it belongs to
        if view is None and (store.session(group.root).meta or {}).get("group"):
            view = {"root": group.root}  # a named group's lead before its first task
        if view is None:
            raise click.ClickException(
                f"session {group.root} is in no agent group (it holds no group events and "
                "no group lists it as a member); `latch group` alone shows the newest group"
            )
        group = Group(store, view["root"])
        doc = {"root": group.root, **group.state().summary()}
        if as_json:
            click.echo(dumps(doc, indent=2))
            return
        con = console(highlight=False, soft_wrap=True)
        m = doc["messages"]
        con.print(
            f"group {safe(group.root)} · {plural(len(doc['tasks']), 'task')} · {plural(len(doc['members']), 'member')} · "
            f"messages {m['delivered']}/{m['queued']} delivered",
            markup=False,
        )
        table = Table("task", "status", "owner", "depends on", "title")
        titles = {t.task_id: t.title for t in group.state().tasks.values()}
        for t in doc["tasks"]:
            table.add_row(
                cell(t["id"]),
                cell(t["status"]),
                cell(t["owner"] or "-"),
                cell(", ".join(t["depends_on"]) or "-"),
                cell(titles[t["id"]]),
            )
        con.print(table)
        for member in doc["members"]:
            # member names come from the model (join, send_message) and users: never printed raw
            con.print(f"member {safe(member['agent'])}: session {safe(member['session'] or '-')}", markup=False)
