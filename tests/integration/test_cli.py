"""The ``aiogroup`` command line: its name, its version and help text a person can read
(issue 23.8)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import aiogroup
from aiogroup.tools.cli import main, program_name


def test_the_installed_script_calls_itself_aiogroup() -> None:
    assert program_name("/venv/bin/aiogroup") == "aiogroup"
    assert program_name("/x/aiogroup/__main__.py") == "python -m aiogroup"


def test_version_and_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"], prog="aiogroup") == 0
    assert capsys.readouterr().out.strip() == f"aiogroup {aiogroup.__version__}"
    assert main(["--help"], prog="aiogroup") == 0
    usage = capsys.readouterr().out
    assert usage.startswith("usage: aiogroup COMMAND")
    assert "python -m" not in usage


@pytest.mark.parametrize("command", ["demo", "group", "analyze"])
def test_subcommand_help_names_the_program_and_has_no_markup(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main([command, "--help"], prog="aiogroup")
    except SystemExit as done:  # argparse's own exit, where the command lets it through
        code = int(done.code or 0)
    assert code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: aiogroup {command}")
    assert "``" not in text and ":class:" not in text


def test_the_script_itself() -> None:
    script = shutil.which("aiogroup", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the aiogroup script is not installed in this environment")
    done = subprocess.run([script, "demo", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("usage: aiogroup demo")
