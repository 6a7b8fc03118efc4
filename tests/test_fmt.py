"""Text cut to a column shows where it was cut."""

from __future__ import annotations

from perftop.fmt import clip, process_label


def test_a_label_longer_than_its_column_ends_in_an_ellipsis() -> None:
    # (a script of transformers' examples, by its real name: 43 characters)
    cmd = "/usr/bin/python3 run_speech_recognition_seq2seq_streaming.py --model_name_or_path x"
    label = process_label("python3", cmd)
    assert len(label) == 40 and label == "run_speech_recognition_seq2seq_streamin…"
    assert process_label("python3", "python3 -m accelerate.commands.launch") == (
        "-m accelerate.commands.launch"
    )
    assert process_label("raylet", "") == "raylet"
    assert clip("python train.py --steps 400", 26) == "python train.py --steps 4…"
    assert clip("python train.py", 15) == "python train.py"
