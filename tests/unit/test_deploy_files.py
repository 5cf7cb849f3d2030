"""The deploy files name only settings the server knows, and the compose file runs two
replicas on one database (issue 20)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from robot_mcp_memory.settings import ENV_VARS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_every_memory_setting_the_deploy_files_name_exists() -> None:
    named: set[str] = set()
    for path in DEPLOY.iterdir():
        named |= set(re.findall(r"\b(MEMORY_[A-Z_]*[A-Z]|MCP_[A-Z_]*[A-Z])\b", path.read_text()))
    assert named, "the deploy files name no setting"
    unknown = sorted(n for n in named if n not in ENV_VARS)
    assert unknown == []


def test_compose_runs_two_replicas_on_one_database() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.postgres.yaml").read_text())
    services = compose["services"]
    replicas = [s for name, s in services.items() if name.startswith("memory-")]
    assert len(replicas) == 2
    urls = {s["environment"]["MEMORY_DATABASE_URL"] for s in replicas}
    assert len(urls) == 1
    (url,) = urls
    assert url.startswith("postgresql://")
    assert "@postgres:5432/" in url
    assert {s["environment"]["ROBOT_ID"] for s in replicas} == {"memory-a", "memory-b"}
    for replica in replicas:
        assert replica["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "pgvector" in services["postgres"]["image"]
    ports = [p for s in replicas for p in s["ports"]]
    assert len({p.split(":")[1] for p in ports}) == 2  # two host ports
