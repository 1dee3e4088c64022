"""Fixtures: a store in a temporary directory, and the agentlog command-line binary."""

import os
import subprocess
from pathlib import Path

import pytest

import agentlog

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cli():
    """The path of the `agentlog` binary: $AGENTLOG_BIN, else built with cargo from this repo."""
    path = os.environ.get("AGENTLOG_BIN")
    if not path:
        subprocess.run(["cargo", "build", "--quiet", "--bin", "agentlog"], cwd=REPO, check=True)
        target = os.environ.get("CARGO_TARGET_DIR", str(REPO / "target"))
        path = os.path.join(target, "debug", "agentlog")
    assert os.path.exists(path), path
    return path


@pytest.fixture
def store_dir(tmp_path):
    return tmp_path / "store"


@pytest.fixture
def store(store_dir):
    return agentlog.Store(store_dir)
