"""sim/files.py: an output file is written whole or not at all."""

import os

import pytest

from sim.errors import InputError
from sim.files import written_whole


def test_a_finished_write_replaces_the_file_and_leaves_nothing_beside_it(tmp_path):
    out = tmp_path / "out.json"
    out.write_text("old")
    with written_whole(out) as fh:
        fh.write("new")
        assert out.read_text() == "old"  # readers see the old file until the new one is whole
    assert out.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_an_interrupted_write_keeps_the_old_file_and_removes_the_partial(tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with written_whole(out, newline="") as fh:
            fh.write("half")
            raise KeyboardInterrupt
    assert out.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_folder_that_cannot_be_written_is_one_line_with_the_callers_code(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(InputError) as e:
            with written_whole(ro / "x.html", "wb", code="E_OUTPUT") as fh:
                fh.write(b"x")
        assert e.value.code == "E_OUTPUT" and str(ro / "x.html") in str(e.value)
    finally:
        ro.chmod(0o700)


def test_a_missing_folder_is_one_line_with_the_callers_code(tmp_path):
    with pytest.raises(InputError) as e:
        with written_whole(tmp_path / "nope" / "x.json") as fh:
            fh.write("x")
    assert e.value.code == "E_FILE_WRITE" and "nope" in str(e.value)
