"""A file of code is named so that it names one file: a library's from its package's folder
on, which the hook's pass names, the stack frames and the collectives' lines all share."""

from __future__ import annotations

from perftop.codepath import code_file, code_line, library_path
from perftop.hints.comm import _short
from perftop.model.stacks import short, where

IGNITE = "/venv/lib/python3.11/site-packages/ignite/engine/__init__.py"


def test_a_librarys_file_is_named_from_its_package_folder_and_the_users_by_its_name() -> None:
    assert library_path(IGNITE) == "ignite/engine/__init__.py"
    assert library_path("/usr/lib/python3/dist-packages/six.py") == "six.py"
    assert library_path("/home/me/train.py") is None
    assert library_path("/x/site-packages/") is None  # the folder itself names no file
    assert code_file(IGNITE) == "ignite/engine/__init__.py"
    assert code_file("/home/me/train.py") == "train.py"
    assert code_file("C:\\envs\\site-packages\\fastai\\learner.py") == "fastai/learner.py"
    assert code_line(f"{IGNITE}:689 evaluate_step") == "ignite/engine/__init__.py:689 evaluate_step"
    assert code_line("/home/me/train.py:54") == "train.py:54"
    assert code_line("-") == "-"
    assert code_line(":5 main") == "5 main"  # no file before the colon: what follows it


def test_stack_frames_and_collective_lines_in_a_library_name_one_file() -> None:
    """ignite's engine and any package's ``__init__.py`` read ``__init__.py:689``: no file."""
    frame = ("evaluate_step", IGNITE, 689)
    assert short(frame) == "ignite/engine/__init__.py:689 evaluate_step"
    # a stack wholly in libraries is said by its innermost frame; the user's line wins
    assert where((frame,)) == "ignite/engine/__init__.py:689 evaluate_step"
    assert where((frame, ("main", "/home/me/train.py", 9))) == "train.py:9 main → evaluate_step"
    assert _short(f"{IGNITE}:689 evaluate_step") == "ignite/engine/__init__.py:689"
    assert _short("/home/me/train.py:54 main") == "train.py:54"
