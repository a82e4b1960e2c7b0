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


def test_a_path_right_after_a_slash_or_an_equals_sign_is_scrubbed():
    """``outputs/`` + an absolute profile path and ``--flag=/abs/path`` both start a path."""
    root = str(paths.project_root())
    text = (
        f"outputs/{root}/params/x and --profile={root}/x; "
        "profile=/opt/lab/params/x, outputs//opt/lab/name, key=/home/alice/y"
    )
    clean, report = publish.scrub(text, env={})
    expected = "outputs/params/x and --profile=x; profile=<path>, outputs/<path>, key=<path>"
    assert clean == expected
    assert report.counts == {"project_path": 2, "other_abs_path": 3}


def test_urls_relative_paths_and_scrubbed_text_are_left_alone():
    text = "see https://example.org/a/b and file://host/x, 3/4, ../shared/x, ~/y, <tmp>/rag-1/a.py"
    clean, report = publish.scrub(text, env={})
    assert clean == text and not report
    once, _ = publish.scrub(f"at {paths.project_root()}/a and /srv/data/b", env={})
    twice, again = publish.scrub(once, env={})
    assert once == "at a and <path>" and twice == once and not again


def test_the_service_scrubs_with_the_same_scrubber(monkeypatch):
    """The service's messages lose what a published page loses: its key, any provider key,
    secret environment values and local paths, with the same replacements."""
    from rag.serve.guard import scrub as serve_scrub

    monkeypatch.setenv("SOME_API_KEY", "env-secret-value-123")
    text = (
        f"key abc123def, env env-secret-value-123, sk-{'a' * 24}, "
        f"{paths.project_root()}/rag/x.py, /home/bob/z.txt"
    )
    expected = "key ***, env ***, ***, rag/x.py, <path>"
    assert serve_scrub(text, ("abc123def",)) == expected
    assert publish.scrub(text, secrets=("abc123def",))[0] == expected


def test_a_changed_cache_folder_is_scrubbed_under_its_new_name(tmp_path, monkeypatch):
    for name in ("first", "second"):
        folder = tmp_path / name
        monkeypatch.setenv(paths.CACHE_ENV, str(folder))
        clean, report = publish.scrub(f"index at {folder}/indexes/x", env={})
        assert clean == "index at <cache>/indexes/x" and report.counts == {"cache_path": 1}
