"""Secrets and absolute paths are scrubbed from anything published."""

from __future__ import annotations

import secrets

from rag import paths
from rag.report import publish


def test_scrubs_env_secret_key_shapes_and_local_paths():
    env_key = "custom-" + secrets.token_hex(12)
    anthropic = "sk-ant-" + secrets.token_hex(16)
    text = (
        f"token {env_key} and {anthropic}\n"
        f"file {paths.project_root()}/rag/x.py and {paths.shared_dir()}/gold/dev.jsonl\n"
        "other /home/alice/notes.txt, but not https://example.org/home/page or 3/4"
    )
    clean, report = publish.scrub(text, env={"MY_API_KEY": env_key})
    assert env_key not in clean and anthropic not in clean
    assert str(paths.project_root()) not in clean
    assert "rag/x.py" in clean and "../shared/gold/dev.jsonl" in clean
    assert "/home/alice" not in clean
    assert "https://example.org/home/page" in clean and "3/4" in clean
    assert report.counts["env_secret"] == 1 and report.counts["anthropic_key"] == 1


def test_short_env_values_are_not_treated_as_secrets():
    clean, report = publish.scrub("value abc", env={"X_API_KEY": "abc"})
    assert clean == "value abc" and not report


def test_base64_images_are_not_mangled():
    b64 = "iVBORw0KGgo+/root/AAAA/home/xyz="
    clean, _ = publish.scrub(b64, env={})
    assert clean == b64
