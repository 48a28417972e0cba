"""The pruning tasks' command twins (`prune_capacity`, `prune_queues`): one `--keep-days` rule, one line out."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command


@pytest.mark.parametrize(("command", "what"), [("prune_capacity", "capacity collections"),
                                               ("prune_queues", "queue collections")])
def test_it_thins_and_says_how_many(db, capsys, command, what):
    call_command(command, "--keep-days", "3")
    assert capsys.readouterr().out == f"thinned 0 {what}\n"
    with pytest.raises(CommandError, match="--keep-days must be at least 1"):
        call_command(command, "--keep-days", "0")
