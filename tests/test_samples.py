import json

from sim.resources import shipped
from sim.samples import write_samples


def test_the_shipped_sample_files_match_what_the_generator_writes(tmp_path):
    written = write_samples(tmp_path)
    for p in written:
        shipped_file = shipped("data", p.parent.name, p.name)
        assert shipped_file.exists(), f"{shipped_file} is missing: run python -m sim.samples data"
        assert json.loads(shipped_file.read_text()) == json.loads(p.read_text()), (
            f"{shipped_file} is stale: run python -m sim.samples data"
        )
