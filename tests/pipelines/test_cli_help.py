"""The command line's help (issue 36): a flag takes no value, so its row shows no type."""

from __future__ import annotations

import pytest
from sia.pipelines.cli import main


@pytest.mark.parametrize("argv", [["--help"], ["figure5", "--help"], ["train", "--help"],
                                  ["evaluate", "--help"]])
def test_flags_show_no_bool_type(argv, capsys):
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "--help" in out and "<bool>" not in out
    assert "<path>" in out or argv == ["--help"]  # options with a value keep their type


def test_usage_errors_stay_one_line(capsys):
    assert main(["figure5", "--no-such-option"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: No such option: --no-such-option") and err.count("\n") == 1
