"""`manage.py team_channel add TEAM NAME --url URL | remove TEAM NAME | enable/disable TEAM NAME | list [TEAM]`:
a team's webhook channels for findings notifications (a generic JSON POST, e.g. a chat incoming webhook). The URL
is a credential: stored encrypted, never printed (only its scheme and host)."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.management.base import BaseCommand, CommandError

from apps.common.outbound import target_problem
from apps.common.redaction import scrub
from apps.findings.models import TeamChannel
from apps.inventory.models import Team


class Command(BaseCommand):
    help = "Add, remove, enable, disable or list a team's webhook channels for findings notifications."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        add = sub.add_parser("add")
        add.add_argument("team")
        add.add_argument("name")
        add.add_argument("--url", required=True, help="http(s) URL the JSON is POSTed to")
        for action in ("remove", "enable", "disable"):
            p = sub.add_parser(action)
            p.add_argument("team")
            p.add_argument("name")
        listing = sub.add_parser("list")
        listing.add_argument("team", nargs="?")

    def _team(self, name: str) -> Team:
        team = Team.objects.filter(name=name).first()
        if team is None:
            raise CommandError(f"no team {name!r}")
        return team

    def handle(self, *args, **opts):
        action = opts["action"]
        if action == "list":
            rows = TeamChannel.objects.select_related("team").order_by("team__name", "name")
            if opts["team"]:
                rows = rows.filter(team=self._team(opts["team"]))
            for c in rows:
                self.stdout.write(f"{c.team.name}\t{c.name}\t{'enabled' if c.enabled else 'disabled'}\t{c.masked_url}")
            return
        team = self._team(opts["team"])
        if action == "add":
            parts = urlsplit(opts["url"])
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise CommandError("--url must be an http:// or https:// URL")
            problem = target_problem(opts["url"])
            if problem:  # checked again at every send: a name may resolve differently later
                raise CommandError(f"--url refused: {scrub(problem, opts['url'])}")
            channel = TeamChannel.objects.filter(team=team, name=opts["name"]).first() or TeamChannel(
                team=team, name=opts["name"])
            channel.url = opts["url"]
            channel.enabled = True
            channel.full_clean(exclude=["url_encrypted"])
            channel.save()
            self.stdout.write(f"{team.name}/{channel.name}: {channel.masked_url}")
            return
        existing = TeamChannel.objects.filter(team=team, name=opts["name"]).first()
        if existing is None:
            raise CommandError(f"team {team.name} has no channel {opts['name']!r}")
        if action == "remove":
            existing.delete()
        else:
            existing.enabled = action == "enable"
            existing.save(update_fields=["enabled"])
        self.stdout.write(f"{team.name}/{opts['name']}: {action}d")
