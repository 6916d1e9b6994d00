from __future__ import annotations

import pytest

from schedpolicy import __version__
from schedpolicy.app.cli import build_parser, main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"schedpolicy {__version__}"


def test_run_takes_kubeconfig_and_context() -> None:
    args = build_parser().parse_args(["run", "--kubeconfig", "/k", "--context", "c"])
    assert (args.command, args.kubeconfig, args.context) == ("run", "/k", "c")


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: schedpolicy" in capsys.readouterr().err
