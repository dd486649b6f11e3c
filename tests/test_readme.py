"""README.md's S3 recipe runs as written, from a directory holding the checkout's `.venv` and `data` (its port 9000
changed to a free one): S3Proxy from the jar `make` fetched, a bucket from a local folder, the bundled trace
ingested into an s3a:// warehouse and queried by device."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from blockheat.libs.io.connect_server import free_port

pytestmark = pytest.mark.spark          # S3Proxy and the commands' JVMs in child processes


def test_the_s3_recipe_runs_as_written(repo_root, tmp_path):
    block = re.search(r"<!-- s3-recipe -->\n```sh\n(.*?)```", (repo_root / "README.md").read_text(), re.DOTALL)
    assert block is not None
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    (tmp_path / "data").symlink_to(repo_root / "data")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BLOCKHEAT_", "AWS_", "AIRFLOW"))}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    done = subprocess.run(["bash", "-e", "-c", block.group(1).replace(":9000", f":{free_port()}")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, (tmp_path / "s3proxy.log").read_text()[-2000:] + done.stderr[-3000:]
    assert done.stdout.splitlines()[-5:] == ["device  requests", "------  --------", "0         42,252",
                                             "1          2,267", "(2 rows)"]
    assert (tmp_path / "s3" / "lake" / "blockheat" / "requests" / "_delta_log").is_dir()
