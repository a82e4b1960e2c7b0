"""Which model names the service takes, stated once for the OpenAPI document and the check.

A request names a model in three places (``answerer``, ``rewrite_model``, the summary's
``model``). The document must say exactly which names the service runs, or a client (or a
fuzzer) sends a name the schema allows and gets a 422. What runs depends on the deployment, so
:meth:`ModelOffer.here` reads it once at start, from the same registry and availability rules
the model factory uses:

- ``extractive`` (an answerer; not a chat model, so never a ``rewrite_model``);
- every registered model whose provider can run here: the packaged local model when its weights
  and engine are installed, an API model when its key is set;
- ``local:NAME`` for those local models, and the profile's ``local_model`` as written when it
  runs (a ``gguf:`` path is never offered: a request must not make the service open a file, and
  the document must not print a local path);
- ``PROVIDER:MODEL`` for any model id of an API provider whose key is set, and of an endpoint
  provider whose endpoint is stated (``RAG_OPENAI_COMPATIBLE_BASE_URL``, ``OLLAMA_HOST``): an
  endpoint nobody stated is not known to run, and a fuzzer naming ``ollama:x`` there would only
  time out. ``MODEL`` is printable ASCII without spaces (every provider's model ids are).

The same holds for retrievers: ``hyde`` (and ``multi-query`` with LLM variants) is offered only
when the profile's ``llm_model`` runs here.

The document carries the exact names as an ``enum`` and the open ones as a ``pattern``;
:meth:`ModelOffer.check` enforces the same and names the reason for a refusal.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag.llm.settings import ApiKeys
    from rag.serve.config import LabSettings

#: A model id after ``provider:``: printable ASCII, no spaces (``qwen2.5:7b``, ``org/model``).
MODEL_ID = "[!-~]+"
#: Longest model name a request may send (endpoint model ids can be long).
MAX_NAME = 200
#: Providers reached over the network with a key.
API_PROVIDERS = ("openai", "anthropic", "groq")
#: Regular-expression characters escaped in a literal name; the result is valid in Python's
#: ``re`` and in ECMA-262 (the dialect of JSON Schema), which rejects needless escapes like ``\-``.
_META = re.compile(r"([\\^$.|?*+()\[\]{}])")


def literal(name: str) -> str:
    """``name`` as a regular expression matching exactly it, in both dialects."""
    return _META.sub(r"\\\1", name)


@dataclass(frozen=True)
class ModelOffer:
    """The model names one running service takes.

    Attributes:
        names: exact chat-model names (sorted), without ``extractive``.
        open_providers: providers any of whose model ids is taken as ``provider:MODEL``.
        reasons: why each provider (or ``local:NAME`` model, or retriever) is not offered.
        retrievers: the retrievers offered, in the report's order.
    """

    names: tuple[str, ...]
    open_providers: tuple[str, ...]
    reasons: Mapping[str, str]
    retrievers: tuple[str, ...]

    @classmethod
    def here(cls, settings: LabSettings) -> ModelOffer:
        """What this machine runs for a profile's ``settings`` (its local and retrieval LLMs),
        from the registry, the installed engines, and the API keys and endpoints of the process
        environment (read once: a service reads its environment at start)."""
        from rag.llm.factory import model_status
        from rag.llm.names import PROVIDERS
        from rag.llm.registry import MODELS
        from rag.llm.settings import ENDPOINT_ENV, keys_from_env
        from rag.retrieval.retrievers import RETRIEVER_NAMES

        env = os.environ
        keys = keys_from_env(env)
        reasons: dict[str, str] = {}
        for provider in PROVIDERS:
            if provider in ENDPOINT_ENV and not env.get(ENDPOINT_ENV[provider], "").strip():
                reasons[provider] = f"no endpoint stated: set {ENDPOINT_ENV[provider]}"
                continue
            if provider in ("gguf", "local"):
                continue  # no open names: judged per model below
            status = model_status([f"{provider}:probe"], keys=keys)[f"{provider}:probe"]
            if status != "run":
                reasons[provider] = status.removeprefix("not run: ")
        names: set[str] = set()
        for name, spec in MODELS.items():
            if spec.provider == "local":
                status = model_status([name], keys=keys)[name]
                if status == "run":
                    names.update((name, f"local:{name}"))
                else:
                    reasons.setdefault(f"local:{name}", status.removeprefix("not run: "))
            elif spec.provider not in reasons and spec.provider in API_PROVIDERS:
                names.add(name)
        if not settings.local_model.startswith("gguf:") and _runs(settings.local_model, keys):
            names.add(settings.local_model)
        open_providers = tuple(
            p for p in PROVIDERS if p not in reasons and p not in ("gguf", "local")
        )
        retrievers = []
        for name in RETRIEVER_NAMES:
            needs_llm = name == "hyde" or (name == "multi-query" and settings.variants == "llm")
            if needs_llm and not _runs(settings.llm_model, keys):
                reasons[name] = f"its LLM {_label(settings.llm_model)!r} does not run here"
            else:
                retrievers.append(name)
        return cls(tuple(sorted(names)), open_providers, reasons, tuple(retrievers))

    # -- the contract --------------------------------------------------------------------------

    def exact(self, answerer: bool) -> list[str]:
        """The exact names a field takes (``answerer``: ``extractive`` first)."""
        return (["extractive"] if answerer else []) + list(self.names)

    def open_pattern(self) -> str | None:
        """The ``provider:MODEL`` names as one anchored pattern (None: no open provider)."""
        if not self.open_providers:
            return None
        alternatives = "|".join(literal(p) for p in self.open_providers)
        return f"^(?:{alternatives}):{MODEL_ID}$"

    def branches(self, answerer: bool) -> list[dict[str, Any]]:
        """The JSON Schemas of the names a field takes: an ``enum`` of the exact names, and a
        ``pattern`` for the open providers' ids (each only when it admits something)."""
        out: list[dict[str, Any]] = []
        if exact := self.exact(answerer):
            out.append({"type": "string", "enum": exact})
        if (pattern := self.open_pattern()) is not None:
            out.append({"type": "string", "pattern": pattern, "maxLength": MAX_NAME})
        return out

    def schema(self, answerer: bool, nullable: bool = False) -> dict[str, Any]:
        """The JSON Schema of a model-name field (``nullable``: null too, for "no model")."""
        branches = self.branches(answerer) + ([{"type": "null"}] if nullable else [])
        if not branches:
            return {"not": {}}  # nothing to name: every value is refused
        return branches[0] if len(branches) == 1 else {"anyOf": branches}

    def takes(self, name: str, answerer: bool) -> bool:
        """Whether a field takes ``name``: exactly what :meth:`schema` admits."""
        if name in self.exact(answerer):
            return True
        pattern = self.open_pattern()
        return pattern is not None and len(name) <= MAX_NAME and bool(re.fullmatch(pattern, name))

    def retriever_schema(self) -> dict[str, Any]:
        """The JSON Schema of a ``retriever`` field: the offered names."""
        return {"type": "string", "enum": list(self.retrievers)}

    def check_retriever(self, name: str) -> None:
        """Refuse a retriever that is not offered (ChoiceError naming ``retriever``)."""
        from rag.serve.engine import ChoiceError

        if name not in self.retrievers:
            why = self.reasons.get(name, f"use one of {', '.join(self.retrievers)}")
            raise ChoiceError("retriever", f"{name!r} is not available here: {why}")

    def check(self, field: str, name: str | None, answerer: bool = True) -> None:
        """Refuse a name the field does not take, with why (a typo, a missing key, a path).

        Raises:
            ChoiceError: naming ``field``.
        """
        from rag.serve.engine import ChoiceError

        if name is None or self.takes(name, answerer):
            return
        raise ChoiceError(field, self.why_not(name, answerer))

    def why_not(self, name: str, answerer: bool = True) -> str:
        """Why ``name`` is not taken, in the words of the rule it breaks."""
        from rag.errors import ConfigError
        from rag.llm.registry import resolve_model

        if name == "extractive":
            return "extractive is an answerer, not a chat model: give a model, or null"
        try:
            spec = resolve_model(name)  # a typo in the provider or a bare name, an unknown local
        except ConfigError as e:
            return str(e)
        if spec.provider == "gguf":
            return (
                f"{spec.name}: gguf: models are served only as the profile's local_model, not "
                "named per request"
            )
        key = f"local:{spec.name}" if spec.provider == "local" else spec.provider
        if key in self.reasons:
            return f"{name!r} is not available here: {self.reasons[key]}"
        if name != name.strip() or spec.provider == "local":
            return f"{name!r}: write the model name without spaces around it"
        return (
            f"{name!r}: a model id here is printable ASCII without spaces, at most "
            f"{MAX_NAME} characters"
        )


def _runs(name: str, keys: ApiKeys) -> bool:
    """Whether model ``name`` runs here (False for a name that is not a model name)."""
    from rag.errors import ConfigError
    from rag.llm.factory import model_status

    try:
        return model_status([name], keys=keys)[name] == "run"
    except ConfigError:  # the profile's own problem, reported where the profile is checked
        return False


def _label(name: str) -> str:
    """A model as a client may see it: a ``gguf:`` file by its file name, never its path."""
    from rag.errors import ConfigError
    from rag.llm.registry import parse_model

    try:
        return parse_model(name).label
    except ConfigError:
        return name
